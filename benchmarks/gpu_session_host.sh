#!/usr/bin/env bash
# One device call (600 s) for the two training models below 0.9 of torch.compile in the
# suite (T5, LLaMA): whether their gap is host work, with cProfile host profiles of danlu's
# and torch.compile's steps side by side; then the wrapper cases on CUDA with their pass
# count (the CUDA-graph replay checks).
#
#   OUT=/some/dir bash benchmarks/gpu_session_host.sh
#
# Writes at most 8 files: $OUT/log.txt, $OUT/wrapper.txt, $OUT/profile_{t5,llama}_train.md,
# $OUT/host_{t5,llama}_train_{danlu,torch}.txt. LIMIT (default 580 s).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
[ -n "${SUITE_SKIP_INSTALL:-}" ] || install_packages
OUT=${OUT:-/tmp/danlu-session-host}
mkdir -p "$OUT"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsh-wrapper \
  timeout 120 python3 triton_wrapper_cases.py cuda /tmp/dsh-wrapper.json > /tmp/dsh-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dsh-wrapper.json > "$OUT/wrapper.txt" 2>&1
cat "$OUT/wrapper.txt"; echo "wrapper at $((SECONDS - start)) s"
: > /tmp/dsh.txt
for model in t5 llama; do
  share=$(left); [ "$model" = t5 ] && share=$(( share / 2 ))  # T5 first: half of what is left
  timeout $(( share - 5 )) python3 benchmarks/gpu_profile.py --model $model \
    --mode train --backends danlu,torch --host-profile --out "$OUT" >> /tmp/dsh.txt 2>&1
  echo "$model train rc=$? at $((SECONDS - start)) s"
done
rm -f "$OUT"/profile_*.json  # at most 8 files come back
tail -c 200000 /tmp/dsh.txt > "$OUT/log.txt"
grep -A14 "GPU ms (launches)" /tmp/dsh.txt
