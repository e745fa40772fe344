#!/usr/bin/env bash
# One short device call (LIMIT 250-400 s), the eighteenth session's checks in order of worth:
# the module-tree guard tests on the device's Python and a check's cost there, the training
# step probe on ResNet-50 (collections, host and synced step, danlu against torch.compile),
# the dynamic-shape stream's symbolic graph, then the wrapper cases. Each step is capped at
# what is left.
#
#   OUT=/some/dir LIMIT=260 bash benchmarks/gpu_session_short.sh
#
# CHECKS_ONLY=1 skips the guard cost and the training-step probe (tests, the dynamic stream and
# the wrapper cases only, about 200 s). Writes $OUT/log.txt, train_host.json, dynamic.json.
set -u
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-300}
source benchmarks/device_common.sh
install_packages
OUT=${OUT:-/tmp/danlu-short}
mkdir -p "$OUT"
export DANLU_CACHE_DIR=/tmp/danlu-cache TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor-cache \
  TRITON_CACHE_DIR=/tmp/triton-cache
echo "== installed at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
timeout $(cap 40) python3 -m pytest -q -p no:cacheprovider packages/dynamo/tests/test_guard_trees.py \
  packages/dynamo/tests/test_guard_checks.py packages/inductor/tests/test_buffers.py \
  packages/inductor/tests/test_direct_launch.py 2>&1 | tail -2 | tee -a "$OUT/log.txt"
if [ -z "${CHECKS_ONLY:-}" ]; then
  timeout $(cap 40) python3 benchmarks/dynamo_guard_cost.py --models resnet50 --calls 1000 2>&1 \
    | tail -1 | tee -a "$OUT/log.txt"
  echo "== guards at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  timeout $(cap 150) python3 benchmarks/probes/train_step_host.py --models resnet50 \
    --backends danlu,torch --out "$OUT/train_host.json" 2>&1 | grep -E "^resnet50|Error" \
    | cut -c1-600 | tee -a "$OUT/log.txt"
  echo "== train_host at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
fi
DANLU_LOGS=fallbacks,recompiles timeout $(cap 90) python3 benchmarks/dynamic_shapes.py \
  --device cuda --ways dynamic --requests 24 --out "$OUT/dynamic.json" > /tmp/dyn.txt 2>&1
echo "== dynamic rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
grep -E "^\||cannot compile|fallbacks\]" /tmp/dyn.txt | cut -c1-400 | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dth-wrapper \
  timeout $(cap 90) python3 triton_wrapper_cases.py cuda /tmp/dth-wrapper.json > /tmp/dth-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dth-wrapper.json 2>&1 | tee -a "$OUT/log.txt"
echo "== done at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
