#!/usr/bin/env bash
# One device call (600 s) that checks the GPU-side changes a session made on the CPU and
# measures the whole suite: the launch-probe and build-pool tests with the device's Triton,
# the wrapper cases on CUDA, then the full suite (seven models, training and inference,
# default mode and reduce-overhead, --jobs 8 on an H200, 4 on a card under 100 GiB: on an
# H100 eight workers ran out of memory), then GPT-2 training's first call alone under
# cProfile with the per-graph build statistics.
#
#   OUT=/some/dir bash benchmarks/gpu_session_check.sh
#
# SUITE_MODELS / SUITE_MODES (default all / train,infer) narrow the suite when a session has
# less device time than a whole call.
#
# Writes at most 8 files: $OUT/checks.txt, $OUT/suite/{results.json,table.md,run.log},
# $OUT/autotune.jsonl (every kernel the suite's danlu workers tuned: each candidate's build
# seconds and time; `python benchmarks/autotune_log.py` summarizes it),
# $OUT/compile_gpt2_train.txt, $OUT/prof_gpt2_compile.txt. Needs expecttest where the opinfo
# cases run (not here). LIMIT (default 580 s) bounds the whole call.
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
install_packages
OUT=${OUT:-/tmp/danlu-session-check}
mkdir -p "$OUT/suite"
{
  (cd packages/inductor/tests && DANLU_CACHE_DIR=/tmp/dsc-tests timeout 90 python3 -m pytest -q \
    -p no:cacheprovider test_direct_launch.py test_precompile_workers.py 2>&1 | tail -5)
  (cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsc-wrapper \
    timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsc-wrapper.json > /tmp/dsc-wrapper.log 2>&1)
  summarize_wrapper_cases /tmp/dsc-wrapper.json
} > "$OUT/checks.txt" 2>&1
echo "checks done at $((SECONDS - start)) s"; cat "$OUT/checks.txt"
suite_limit=$((LIMIT - 40 - (SECONDS - start)))  # the suite first; the profile gets what is left
gib=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).total_memory >> 30)" 2>/dev/null || echo 0)
jobs=${SUITE_JOBS:-$([ "$gib" -ge 100 ] && echo 8 || echo 4)}
DANLU_AUTOTUNE_LOG=$OUT/autotune.jsonl OUT=$OUT/suite SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$suite_limit bash benchmarks/gpu_suite.sh \
  --models "${SUITE_MODELS:-all}" --modes "${SUITE_MODES:-train,infer}" \
  --backends eager,torch,danlu,torch-ro,danlu-ro --jobs "$jobs" \
  --time-budget $((suite_limit - 40)) > /tmp/dsc-suite.txt 2>&1
echo "suite rc=$? at $((SECONDS - start)) s"
rm -rf "$OUT/suite/speedups.png" "$OUT/suite/.workers" "$OUT/suite/.timing.lock"  # 8 files come back
tail -45 "$OUT/suite/table.md" 2>/dev/null
python3 benchmarks/autotune_log.py "$OUT/autotune.jsonl" --markdown 2>&1 | tail -12
left=$(left)
if [ "$left" -gt 40 ]; then
  DANLU_CACHE_DIR=/tmp/dsc-profile timeout $left python3 benchmarks/gpu_profile.py --model gpt2 \
    --mode train --backends danlu --compile-profile --iters 2 --out /tmp/dsc-p \
    > "$OUT/prof_gpt2_compile.txt" 2>&1
  echo "gpt2 compile profile rc=$? at $((SECONDS - start)) s"
  grep -A3 "compile phases" "$OUT/prof_gpt2_compile.txt"
  cp /tmp/dsc-p/compile_gpt2_train.txt "$OUT/" 2>/dev/null
fi
