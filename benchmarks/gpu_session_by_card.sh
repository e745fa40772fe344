#!/usr/bin/env bash
# One device call for a session with little device time left, the card it gets unknown. On an
# H200 with a LIMIT of 450 s or more: the whole suite (issue 19 names the H200), its
# reduce-overhead units too from a LIMIT of 560 s. On any other card, or with less time: the
# short checks of the code no GPU has run yet (gpu_session_short.sh: guard and buffer tests,
# the training-step probe, the dynamic-shape stream, the wrapper cases).
#
#   OUT=/some/dir LIMIT=400 bash benchmarks/gpu_session_by_card.sh
#
# CHECKS_ONLY=1 passes on to the short checks (no guard cost, no training-step probe).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/danlu-by-card}
mkdir -p "$OUT"
LIMIT=${LIMIT:-400}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card, limit $LIMIT s" | tee "$OUT/card.txt"
# below 450 s the suite would time too few units to be read: the short checks instead
suite=$card
[ "$LIMIT" -lt 450 ] && suite=short
case "$suite" in
  *H200*)
    backends=eager,torch,danlu
    [ "$LIMIT" -ge 560 ] && backends=$backends,torch-ro,danlu-ro
    LIMIT=$LIMIT BACKENDS=${BACKENDS:-$backends} OUT=$OUT bash benchmarks/gpu_session_suite_guards.sh ;;
  *) LIMIT=$LIMIT OUT=$OUT bash benchmarks/gpu_session_short.sh ;;
esac
