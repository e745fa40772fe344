#!/usr/bin/env bash
# One device call (600 s) for what the ninth session changed without a GPU: dynamic shapes on
# CUDA (a BERT encoder over 23 sequence lengths: recompiling, padding to buckets, one symbolic
# graph; the symbolic graph's copies per linear layer and per weight are gone, and the fake
# attention that kept CUDA lengths symbolic has never run on a GPU), the interpreted cases of
# the new kernel-size cap and dynamic folds on CUDA, then ConvNeXt-T and GPT-2 inference with
# reduce-overhead beside torch.compile's, each with an option A/B in default mode (ConvNeXt:
# grouped input kernels; GPT-2: the LM head split in columns instead of a padded weight) and
# their kernel lists (both are below 0.9 of torch.compile with reduce-overhead, and neither
# has a profile).
#
#   OUT=/some/dir bash benchmarks/gpu_session_dynamic.sh
#
# Writes $OUT/log.txt, dynamic_shapes.json, kernel_cases.json, and per model a profile
# (profile_<model>_infer.md) and its kernel list (kernels_<model>_infer.txt): 7 files.
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
[ -n "${SUITE_SKIP_INSTALL:-}" ] || install_packages
OUT=${OUT:-/tmp/danlu-session-dynamic}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsd-triton DANLU_CACHE_DIR=/tmp/dsd-cache
rm -rf /tmp/dsd-triton /tmp/dsd-cache
DANLU_LOGS=dynamic,recompiles timeout $(( $(left) - 300 )) python3 benchmarks/dynamic_shapes.py \
  --device cuda --requests 24 --out "$OUT/dynamic_shapes.json" > /tmp/dsd-dyn.txt 2>&1
echo "== dynamic_shapes rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
grep -E '^\||"way"|requests|specialis|Eq\(' /tmp/dsd-dyn.txt | head -40 | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && DANLU_CASES=residual_chain_many_streams,channels_last_value_in_channel_norm,lm_head_split_columns,grouped_input_kernels,tiny_counters,batch_norm_training_split_stats,rms_norm_backward_row_blocks \
  timeout 120 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsd-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
tail -5 /tmp/dsd-cases.txt | tee -a "$OUT/log.txt"
infer_profile() {  # model, danlu-opt's options: reduce-overhead beside torch.compile's, an A/B
  profile_model "$1" infer torch-ro,danlu-ro,danlu,danlu-opt "$2" 90 || return
  # the kernel lists too: no per-kernel profile of either model's inference exists yet
  grep -E "^== |^ +[0-9.]+ ms|compile phases|first runs" "/tmp/dprof-$1-infer.txt" | head -160 \
    > "$OUT/kernels_$1_infer.txt"
}
infer_profile convnext_tiny '{"group_input_kernels": true}'
infer_profile gpt2 '{"split_unaligned_columns": true}'  # the LM head without a padded weight
