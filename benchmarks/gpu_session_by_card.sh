#!/usr/bin/env bash
# One device call for a session with little device time left, which card it gets unknown:
# on an H200 the whole suite in default mode (issue 19 names the H200; no reduce-overhead
# units, which need more time), on any other card the short checks of the code that has not
# run on a GPU yet (gpu_session_short.sh: guard and buffer tests, the training-step probe, the
# dynamic-shape stream, the wrapper cases).
#
#   OUT=/some/dir LIMIT=400 bash benchmarks/gpu_session_by_card.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/danlu-by-card}
mkdir -p "$OUT"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card" | tee "$OUT/card.txt"
case "$card" in
  *H200*) LIMIT=${LIMIT:-400} BACKENDS=eager,torch,danlu OUT=$OUT \
    bash benchmarks/gpu_session_suite_guards.sh ;;
  *) LIMIT=${LIMIT:-400} OUT=$OUT bash benchmarks/gpu_session_short.sh ;;
esac
