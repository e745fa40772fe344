#!/usr/bin/env bash
# One device call (about 450 s with LIMIT=560). Run 81 (seventeenth session) ran it before
# the session's host changes; the eighteenth session's first call runs it again to check them:
# the wrapper cases (the direct launch no longer checks sizes Triton does not specialise on),
# the dynamic-shape stream's symbolic graph (run 81: 2 compiles, 1.01x of eager; predicted
# 1.15-1.35x), the collector probe on ResNet-50 training (run 81: 20 collections in 20 steps;
# predicted at most 2, the step 1.0-1.5 ms shorter where host-bound), then the suite's
# reduce-overhead units for ConvNeXt-T and ViT-B/16 and ResNet-50 training alone (--jobs 1).
#
#   OUT=/some/dir LIMIT=560 bash benchmarks/gpu_session_train_host.sh
#
# Writes $OUT/log.txt, dynamic.json, train_host.json, and the two suite runs' table_*.md and
# results_*.json.
set -u
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-560}
source benchmarks/device_common.sh
install_packages
OUT=${OUT:-/tmp/danlu-train-host}
mkdir -p "$OUT"
export DANLU_CACHE_DIR=/tmp/danlu-cache TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor-cache \
  TRITON_CACHE_DIR=/tmp/triton-cache
# the wrapper cases first: the direct launch's checks changed (sizes Triton does not specialise
# on are no longer checked)
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dth-wrapper \
  timeout $(cap 90) python3 triton_wrapper_cases.py cuda /tmp/dth-wrapper.json > /tmp/dth-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dth-wrapper.json 2>&1 | tee -a "$OUT/log.txt"
# the module-tree guards (eighteenth session): their tests on this Python, and a check's cost
timeout $(cap 60) python3 -m pytest -q -p no:cacheprovider packages/dynamo/tests/test_guard_trees.py \
  packages/dynamo/tests/test_guard_checks.py packages/inductor/tests/test_buffers.py 2>&1 | tail -2 | tee -a "$OUT/log.txt"
timeout $(cap 60) python3 benchmarks/dynamo_guard_cost.py --models resnet50,gpt2 2>&1 | tail -2 \
  | tee -a "$OUT/log.txt"
DANLU_LOGS=fallbacks,recompiles timeout $(cap 90) python3 benchmarks/dynamic_shapes.py --device cuda \
  --ways dynamic --requests 24 --out "$OUT/dynamic.json" > /tmp/dyn.txt 2>&1
echo "== dynamic rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
grep -E "^\||cannot compile|fallbacks\]" /tmp/dyn.txt | cut -c1-400 | tee -a "$OUT/log.txt"
timeout $(cap 220) python3 benchmarks/probes/train_step_host.py --models resnet50,t5 --backends danlu,torch \
  --out "$OUT/train_host.json" 2>&1 | grep -E "^(resnet50|t5)|Error" | tee -a "$OUT/log.txt"
echo "== train_host at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
suite() {  # tag, then gpu_models.py's arguments
  local tag=$1 budget
  shift
  budget=$(( $(left) - 15 ))
  [ "$budget" -gt 60 ] || { echo "$tag: no time left" | tee -a "$OUT/log.txt"; return; }
  timeout "$budget" python3 benchmarks/gpu_models.py --out "/tmp/suite-$tag" \
    --deadline $((budget - 20)) "$@" > "/tmp/suite-$tag.log" 2>&1
  echo "== suite $tag rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  cp "/tmp/suite-$tag/table.md" "$OUT/table_$tag.md" 2>/dev/null
  cp "/tmp/suite-$tag/results.json" "$OUT/results_$tag.json" 2>/dev/null
  grep -E "ok median|error|fail" "/tmp/suite-$tag.log" | tail -12 | tee -a "$OUT/log.txt"
}
suite ro --models convnext_tiny,vit_base_patch16_224 --modes infer \
  --backends eager,torch-ro,danlu-ro --jobs 2
suite r50 --models resnet50 --modes train --backends eager,torch,danlu --jobs 1
