#!/usr/bin/env bash
# Two model suites at once on a two-GPU machine, one per GPU, each a gpu_suite.sh run with its
# own caches (so both compile times stay cold ones). Installs the packages once.
#
# Usage (from the repo root):
#   OUT=/dir SUITE_LIMIT=540 bash benchmarks/gpu_suite_pair.sh "--models gpt2 ..." "--models bert ..."
# Results: $OUT/gpu0 and $OUT/gpu1 (results.json, table.md, speedups.png, run.log each);
# merge them with  python benchmarks/gpu_models.py --merge DIR0 DIR1 --out DIR.
set -u
start=$SECONDS
OUT=${OUT:-/tmp/danlu-gpu-pair}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
for p in primtorch dynamo aotautograd inductor compile; do
  "$PY" -m pip install -q --no-deps --no-build-isolation -e "packages/$p" \
    >"/tmp/gpu_pair_install_$p.log" 2>&1 \
    || { echo "gpu_suite_pair: install of packages/$p failed:"; tail -20 "/tmp/gpu_pair_install_$p.log"; }
done
limit=$(( ${SUITE_LIMIT:-585} - (SECONDS - start) ))
pids=()
for gpu in 0 1; do
  if [ "$gpu" = 0 ]; then args=$1; else args=${2:-}; fi
  [ -n "$args" ] || continue
  # shellcheck disable=SC2086  # the arguments are given as one word per GPU
  CUDA_VISIBLE_DEVICES=$gpu SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$limit OUT="$OUT/gpu$gpu" \
    DANLU_CACHE_DIR=/tmp/danlu-cache-$gpu TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor-cache-$gpu \
    TRITON_CACHE_DIR=/tmp/triton-cache-$gpu \
    bash benchmarks/gpu_suite.sh $args >"$OUT/gpu$gpu.log" 2>&1 &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
for gpu in 0 1; do [ -f "$OUT/gpu$gpu.log" ] && tail -n 30 "$OUT/gpu$gpu.log"; done
echo "gpu_suite_pair: exit $rc after $((SECONDS - start)) s"
exit $rc
