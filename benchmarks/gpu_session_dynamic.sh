#!/usr/bin/env bash
# One device call (600 s) for what the ninth session changed without a GPU: dynamic shapes on
# CUDA (a BERT encoder over 23 sequence lengths: recompiling, padding to buckets, one symbolic
# graph; the symbolic graph's copies per linear layer and per weight are gone, and the fake
# attention that kept CUDA lengths symbolic has never run on a GPU), the interpreted cases of
# the new kernel-size cap and dynamic folds on CUDA, then ConvNeXt-T inference with
# reduce-overhead beside torch.compile's, with and without grouped input kernels.
#
#   OUT=/some/dir bash benchmarks/gpu_session_dynamic.sh
#
# Writes $OUT/log.txt, dynamic_shapes.json, kernel_cases.json and profile_convnext_tiny_infer.md.
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
(cd packages/inductor/tests && DANLU_CASES=residual_chain_many_streams,grouped_input_kernels,tiny_counters,batch_norm_training_split_stats,rms_norm_backward_row_blocks \
  timeout 120 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsd-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
tail -5 /tmp/dsd-cases.txt | tee -a "$OUT/log.txt"
budget=$(( $(left) - 10 ))
if [ "$budget" -gt 90 ]; then
  timeout "$budget" python3 benchmarks/gpu_profile.py --model convnext_tiny --mode infer \
    --backends torch-ro,danlu-ro,danlu-opt --danlu-options '{"group_input_kernels": true}' \
    --iters 5 --out /tmp/dsd-p > /tmp/dsd-convnext.txt 2>&1
  echo "== convnext_tiny infer rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  grep -E "^== |compile phases|first runs" /tmp/dsd-convnext.txt | tee -a "$OUT/log.txt"
  cp /tmp/dsd-p/profile_convnext_tiny_infer.md "$OUT/" 2>/dev/null
fi
