#!/bin/bash
# The Triton backend on a real GPU, in one go (about 5 minutes on an H200):
#   bash packages/inductor/tests/run_gpu_checks.sh OUTDIR
#   (SKIP_INSTALL=1 when the packages are installed; PYTEST_FILES to choose the test files)
# installs the five packages in editable mode; runs the Triton test files (interpreter +
# sm_90 AOT, with this machine's triton) in the background; compile_fx on CUDA for the
# wrapper cases; the GPT-2 block check (fp32 / bf16 autocast, forward+backward, eager vs
# danlu vs torch.compile); the kernel cases on CUDA; then prints a summary.
OUT=${1:-/tmp/danlu_gpu}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
export PYTHONUNBUFFERED=1 DANLU_CACHE_DIR=${DANLU_CACHE_DIR:-/tmp/danlu_cache}
cd "$ROOT" || exit 1
# GPU_CHECKS_FOREGROUND=1: the timed steps stay in this script's process group (a GPU suite
# measuring beside these checks stops that group while it times; `timeout` alone would move
# each step to a group of its own)
TIMEOUT="timeout"
[ -n "$GPU_CHECKS_FOREGROUND" ] && TIMEOUT="timeout --foreground"
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  # SKIP_INSTALL=1: the packages are installed already (e.g. by a script running other checks
  # at the same time, which a reinstall would disturb).
  if [ -z "$SKIP_INSTALL" ]; then
    for p in primtorch aotautograd inductor dynamo compile; do
      python3 -m pip install -q --no-deps --no-build-isolation -e packages/$p || echo "INSTALL FAILED: $p"
    done
  fi
} > "$OUT/install.log" 2>&1
cat "$OUT/install.log" | grep -v "^$" | tail -4
cd packages/inductor/tests || exit 1
($TIMEOUT ${PYTEST_TIMEOUT:-200} python3 -m pytest -q -n 4 -p no:cacheprovider \
  ${PYTEST_FILES:-test_triton_wrapper.py test_triton_codegen.py test_triton_printer.py test_direct_launch.py test_precompile_workers.py} \
  > "$OUT/pytest_triton.txt" 2>&1; echo "rc=$?" >> "$OUT/pytest_triton.txt") &
TRITON_DEFAULT_FP_FUSION=0 $TIMEOUT ${WRAPPER_TIMEOUT:-90} python3 triton_wrapper_cases.py cuda \
  "$OUT/wrapper_cuda.json" > "$OUT/wrapper_cuda.log" 2>&1
echo "wrapper_cuda rc=$?"
$TIMEOUT ${GPT_TIMEOUT:-170} python3 triton_gpu_check.py "$OUT/gpt2.json" $GPT_ARGS \
  > "$OUT/gpt2.log" 2>&1
echo "gpt2 rc=$?"
if [ -z "$SKIP_CASES" ]; then
  TRITON_DEFAULT_FP_FUSION=0 DANLU_OPINFO_SECONDS=${DANLU_OPINFO_SECONDS:-15} \
    $TIMEOUT ${CASES_TIMEOUT:-90} python3 triton_cases.py cuda "$OUT/cases_cuda.json" \
    > "$OUT/cases_cuda.log" 2>&1
  echo "cases_cuda rc=$?"
fi
wait
tail -3 "$OUT/pytest_triton.txt"
python3 summarize_gpu_checks.py "$OUT"
