#!/usr/bin/env bash
# The first device call of a session after a CPU-side one (one start, about 570 s): what the
# fourteenth session changed, checked, and what it needs measured, in order of importance:
# the build workers' start and device memory now that they open no CUDA context (H100, run
# 64: 16 helper-pool workers held 8.18 GiB and the first answered after 7.0 s with a context,
# 5.8 s without; predicted now 5.5-6.0 s and under 0.5 GiB held after real builds); the
# column reductions of channels-last images (batch-norm backward sums and statistics) over
# splits and launch configs, beside torch.compile and danlu.compile (the next change's
# numbers); a cold reduce-overhead compile of ViT inference, one job (run 64: 10.3 s against
# torch.compile's 9.7; predicted 8.5-9.5 s).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, worker_startup.json, outer_reduction_sweep.json, sweep.txt,
# ro_cold.md (5 files). Installs the packages only when the machine does not have them.
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
timeout 150 python3 benchmarks/worker_startup.py --workers 16 --methods helper,spawn \
  > "$OUT/worker_startup.json" 2>&1
echo "== worker startup rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
cat "$OUT/worker_startup.json" | tee -a "$OUT/log.txt"
nvidia-smi --query-gpu=memory.used --format=csv | tee -a "$OUT/log.txt"
budget=$(( $(left) - 110 ))
if [ "$budget" -gt 60 ]; then
  timeout $((budget + 30)) python3 benchmarks/outer_reduction_sweep.py --budget "$budget" \
    --out "$OUT/outer_reduction_sweep.json" > "$OUT/sweep.txt" 2>&1
  echo "== sweep rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  grep -v "^\s*$" "$OUT/sweep.txt" | grep -v Warning | tail -60
fi
# a cold reduce-overhead compile, one job (its own cache folders)
budget=$(( $(left) - 10 ))
if [ "$budget" -gt 60 ]; then
  DANLU_CACHE_DIR=/tmp/dsf-ro-cache TRITON_CACHE_DIR=/tmp/dsf-ro-triton OUT=/tmp/dsf-ro \
    SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$budget bash benchmarks/gpu_suite.sh \
    --models vit_base_patch16_224 --modes infer --backends eager,torch-ro,danlu-ro --jobs 1 \
    --time-budget $((budget - 20)) > /tmp/dsf-ro.txt 2>&1
  echo "== ro cold rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  { sed -n '/^| model | mode | eager/,/^$/p' /tmp/dsf-ro/table.md; grep -E "danlu.compile reduce-overhead:" /tmp/dsf-ro/table.md; } > "$OUT/ro_cold.md" 2>&1
else
  echo "ro cold: no time left" | tee -a "$OUT/log.txt"
fi
cat "$OUT/ro_cold.md" 2>/dev/null
