#!/usr/bin/env bash
# The first device call of a session after a CPU-side one (one start, about 570 s): what the
# fourteenth session left unverified, in order of importance: the build workers' device
# memory after real builds now that they stub Triton's current-stream query (run 66: 8.18
# GiB for 16 workers after builds, nothing before; predicted under 0.5 GiB); the GPU tests
# of the L2-evicted autotuning and the workers, and the wrapper cases; then ViT's and
# ConvNeXt-T's inference, default and reduce-overhead, with 4 jobs (run 65 skipped their
# reduce-overhead units; compile seconds against torch.compile's, and the column
# reductions' new candidates on ConvNeXt-T).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, worker_startup.json, gpu_tests.txt, wrapper_cases.txt, suite.md
# (5 files). Installs the packages only when the machine does not have them.
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
timeout 150 python3 benchmarks/worker_startup.py --workers 16 --methods helper \
  > "$OUT/worker_startup.json" 2>&1
echo "== worker startup rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
cat "$OUT/worker_startup.json" | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && DANLU_CACHE_DIR=/tmp/dsf-tests timeout 120 python3 -m pytest -q \
  -p no:cacheprovider test_autotune_scratch.py test_precompile_workers.py > "$OUT/gpu_tests.txt" 2>&1)
echo "== gpu tests rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
tail -3 "$OUT/gpu_tests.txt" | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsf-wrapper \
  timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsf-wrapper.json > /tmp/dsf-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dsf-wrapper.json > "$OUT/wrapper_cases.txt" 2>&1
cat "$OUT/wrapper_cases.txt" | tee -a "$OUT/log.txt"
budget=$(( $(left) - 10 ))
if [ "$budget" -gt 120 ]; then
  OUT=/tmp/dsf-suite SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$budget bash benchmarks/gpu_suite.sh \
    --models vit_base_patch16_224,convnext_tiny --modes infer \
    --backends eager,torch,danlu,torch-ro,danlu-ro --jobs 4 --time-budget $((budget - 20)) \
    > /tmp/dsf-suite.txt 2>&1
  echo "== suite rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  cp /tmp/dsf-suite/table.md "$OUT/suite.md" 2>/dev/null
  sed -n '/^| model | mode | eager/,/^$/p' "$OUT/suite.md"
  grep -A8 "own medians" "$OUT/suite.md"
else
  echo "suite: no time left" | tee -a "$OUT/log.txt"
fi
