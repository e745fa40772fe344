#!/usr/bin/env bash
# Runs the package test suites on the GPU machine (CPython 3.12, torch 2.11, triton 3.6):
# proves the packages work on the other supported Python and torch, and records the counts.
# Usage (from the repo root): OUT=/some/dir bash benchmarks/gpu_machine_check.sh
set -u
OUT=${OUT:-/tmp/danlu-gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=8
{
  python3 --version
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.cuda.is_available())'
} 2>&1 | tee "$OUT/versions.txt"
for p in primtorch dynamo aotautograd inductor compile; do
  python3 -m pip install -q --no-deps --no-build-isolation -e "packages/$p" >"$OUT/install_$p.log" 2>&1 \
    || { echo "install $p failed"; tail -20 "$OUT/install_$p.log"; }
done
run() {  # name, timeout, pytest args...
  local name=$1 limit=$2
  shift 2
  timeout "$limit" python3 -m pytest -q -p no:cacheprovider --timeout=240 "$@" >"$OUT/$name.log" 2>&1
  echo "$name: rc=$? $(tail -n 1 "$OUT/$name.log")" | tee -a "$OUT/summary.txt"
}
run dynamo_no_torch 60 packages/dynamo/tests/no_torch
run dynamo 150 -n 8 packages/dynamo/tests
run aotautograd 100 -n 8 packages/aotautograd/tests
run inductor 120 -n 8 packages/inductor/tests
run primtorch 100 -n 8 packages/primtorch/tests
cat "$OUT/summary.txt"
