#!/usr/bin/env bash
# The second device call of a session (one start, about 570 s): what the last CPU-side
# session changed, checked and measured. In order of importance, each in what is left: the
# interpreted kernel cases of the changed lowerings on CUDA (convolution bias gradients,
# short split statistics, channels-last norms), ConvNeXt-T and ResNet-50 training beside
# torch.compile (the eleventh session's predictions: docs/benchmarks.md), then ResNet-50
# inference's host time with cProfile, danlu and torch.compile side by side (its GPU kernels
# are shorter than torch.compile's; its step is not).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, kernel_cases.json, profile_{convnext_tiny,resnet50}_train.md,
# host_resnet50_infer.txt (5 files). Installs the packages only when the machine does not
# have them (a warm machine from an earlier call does).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
(cd packages/inductor/tests && DANLU_CASES=conv_backward_bias_grad,batch_norm_training_short_extent_channels_last,batch_norm_training_split_stats,channels_last_value_in_channel_norm,tiny_counters \
  timeout 120 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsf-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
python3 -c "import json,sys; [print(k, v.get('ok'), str(v.get('error', ''))[-300:]) for k, v in json.load(open(sys.argv[1])).items()]" "$OUT/kernel_cases.json" 2>&1 | tee -a "$OUT/log.txt"
profile_model convnext_tiny train danlu,torch '{}' 120
profile_model resnet50 train danlu,torch '{}' 120
budget=$(( $(left) - 10 ))
if [ "$budget" -gt 60 ]; then
  timeout "$budget" python3 benchmarks/gpu_profile.py --model resnet50 --mode infer \
    --backends danlu,torch --host-profile --iters 5 --out /tmp/dsf-host > /tmp/dsf-host.txt 2>&1
  echo "== resnet50 infer host profile rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  tail -c 150000 /tmp/dsf-host.txt > "$OUT/host_resnet50_infer.txt"
fi
tail -40 "$OUT"/profile_*.md 2>/dev/null | grep -E "^\||^==>" | head -80
