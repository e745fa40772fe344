#!/usr/bin/env bash
# One device call (about 590 s) for a session that may get only one: the whole suite (issue
# 19's done-when, cold caches) with the module-tree guards (eighteenth session), their tests on
# the device's Python first, then the dynamic-shape stream on CUDA with what is left.
#
#   OUT=/some/dir bash benchmarks/gpu_session_suite_guards.sh
#
# With less device time left: LIMIT=450 BACKENDS=eager,torch,danlu (no reduce-overhead units).
#
# Writes the suite's results.json, table.md, speedups.png, run.log, then guards.txt and
# dynamic.txt (6 files).
set -u
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-590}
source benchmarks/device_common.sh
OUT=${OUT:-/tmp/danlu-suite-guards}
mkdir -p "$OUT"
install_packages
{
  timeout 60 python3 -m pytest -q -p no:cacheprovider packages/dynamo/tests/test_guard_trees.py \
    packages/dynamo/tests/test_guard_checks.py packages/inductor/tests/test_buffers.py 2>&1 | tail -2
  echo "== guard tests at $((SECONDS - start)) s"
} > "$OUT/guards.txt"
cat "$OUT/guards.txt"
SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$(( $(left) - 90 )) bash benchmarks/gpu_suite.sh --models all \
  --modes train,infer --backends "${BACKENDS:-eager,torch,danlu,torch-ro,danlu-ro}" --jobs 4 \
  --time-budget $(( $(left) - 110 ))
echo "== suite rc=$? at $((SECONDS - start)) s"
export TRITON_CACHE_DIR=/tmp/dsg-triton DANLU_CACHE_DIR=/tmp/dsg-cache
DANLU_LOGS=fallbacks,recompiles timeout $(( $(left) - 5 )) python3 benchmarks/dynamic_shapes.py \
  --device cuda --ways dynamic --requests 24 --out /tmp/dsg-dynamic.json > /tmp/dsg-dyn.txt 2>&1
echo "== dynamic rc=$? at $((SECONDS - start)) s" | tee -a /tmp/dsg-dyn.txt
grep -E "^\||cannot compile|fallbacks\]|rc=" /tmp/dsg-dyn.txt | cut -c1-400 > "$OUT/dynamic.txt"
cat "$OUT/dynamic.txt"
