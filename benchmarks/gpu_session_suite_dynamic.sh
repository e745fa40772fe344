#!/usr/bin/env bash
# One device call (about 590 s): the whole suite (issue 19's done-when, cold caches), then the
# dynamic-shape stream on CUDA (a BERT encoder over 23 sequence lengths: recompiling, padding
# to buckets, one symbolic graph). The symbolic graph last ran on a GPU on 2026-11-30 (23
# compiles, 0.31x of eager); since then the fake attention keeps CUDA lengths symbolic and the
# symbolic graph's per-layer copies are gone (interpreted on the CPU: 2 compiles).
#
#   OUT=/some/dir bash benchmarks/gpu_session_suite_dynamic.sh
#
# Writes the suite's results.json, table.md, speedups.png, run.log, then dynamic_shapes.json
# and dynamic.txt (6 files).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
OUT=${OUT:-/tmp/danlu-suite-dynamic}
mkdir -p "$OUT"
SUITE_LIMIT=${SUITE_LIMIT:-420} bash benchmarks/gpu_suite.sh --models all --modes train,infer \
  --backends eager,torch,danlu,torch-ro,danlu-ro --jobs 4 --time-budget 380
echo "== suite rc=$? at $((SECONDS - start)) s"
export TRITON_CACHE_DIR=/tmp/dsd-triton DANLU_CACHE_DIR=/tmp/dsd-cache
rm -rf /tmp/dsd-triton /tmp/dsd-cache
DANLU_LOGS=dynamic,recompiles timeout $(( $(left) - 5 )) python3 benchmarks/dynamic_shapes.py \
  --device cuda --requests 24 --out "$OUT/dynamic_shapes.json" > /tmp/dsd-dyn.txt 2>&1
echo "== dynamic_shapes rc=$? at $((SECONDS - start)) s" | tee -a /tmp/dsd-dyn.txt
grep -vE "^\s*$" /tmp/dsd-dyn.txt | tail -60 > "$OUT/dynamic.txt"
grep -E '^\||rc=' /tmp/dsd-dyn.txt
