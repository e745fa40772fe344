#!/usr/bin/env bash
# The second device call of a session with little device time (one start and about 570 s):
# the parts of gpu_session_vision.sh and gpu_session_dynamic.sh that matter most, in order of
# importance, each in what is left: the interpreted kernel cases on CUDA (correctness of the
# kernel-size cap, grouped input kernels, the split LM head), ResNet-50 training beside
# torch.compile with the grouped input kernels as an A/B, GPT-2 inference with reduce-overhead
# and the LM head split in columns as an A/B, then dynamic shapes on CUDA.
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, kernel_cases.json, profile_resnet50_train.md, profile_gpt2_infer.md,
# kernels_gpt2_infer.txt, dynamic_shapes.json (6 files). Installs the packages only when the
# machine does not have them (a warm machine from an earlier call does).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
(cd packages/inductor/tests && DANLU_CASES=residual_chain_many_streams,channels_last_value_in_channel_norm,lm_head_split_columns,grouped_input_kernels,tiny_counters,batch_norm_training_split_stats,rms_norm_backward_row_blocks \
  timeout 120 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsf-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
tail -5 /tmp/dsf-cases.txt | tee -a "$OUT/log.txt"
profile_model resnet50 train danlu,danlu-opt,torch '{"group_input_kernels": true}' 120
if profile_model gpt2 infer torch-ro,danlu-ro,danlu,danlu-opt '{"split_unaligned_columns": true}' 90; then
  grep -E "^== |^ +[0-9.]+ ms|compile phases|first runs" /tmp/dprof-gpt2-infer.txt | head -160 \
    > "$OUT/kernels_gpt2_infer.txt"
fi
budget=$(( $(left) - 10 ))
if [ "$budget" -gt 60 ]; then
  DANLU_LOGS=dynamic,recompiles timeout "$budget" python3 benchmarks/dynamic_shapes.py \
    --device cuda --requests 24 --out "$OUT/dynamic_shapes.json" > /tmp/dsf-dyn.txt 2>&1
  echo "== dynamic_shapes rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  grep -E '^\||"way"|requests|specialis|Eq\(' /tmp/dsf-dyn.txt | head -40 | tee -a "$OUT/log.txt"
fi
tail -40 "$OUT"/profile_*.md 2>/dev/null | grep -E "^\||^==>" | head -80
