#!/bin/bash
# The Triton backend on a real GPU, in one go (about 5 minutes on an H200):
#   bash packages/inductor/tests/run_gpu_checks.sh OUTDIR
# installs the five packages in editable mode, runs the Triton test files (interpreter +
# sm_90 AOT, on this machine's triton), the wrapper and kernel cases on CUDA, and the
# GPT-2 block check (fp32 / bf16 autocast, forward+backward, eager vs danlu vs torch.compile).
OUT=${1:-/tmp/danlu_gpu}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
export PYTHONUNBUFFERED=1 DANLU_CACHE_DIR=${DANLU_CACHE_DIR:-/tmp/danlu_cache}
cd "$ROOT" || exit 1
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  for p in primtorch aotautograd inductor dynamo compile; do
    pip install -q --no-deps --no-build-isolation -e packages/$p || echo "INSTALL FAILED: $p"
  done
} > "$OUT/install.log" 2>&1
tail -3 "$OUT/install.log"
cd packages/inductor/tests || exit 1
(timeout 240 python3 -m pytest -q -n 6 -p no:cacheprovider test_triton_wrapper.py \
  test_triton_codegen.py test_triton_printer.py > "$OUT/pytest_triton.txt" 2>&1
 echo "rc=$?" >> "$OUT/pytest_triton.txt") &
TRITON_DEFAULT_FP_FUSION=0 timeout 150 python3 triton_wrapper_cases.py cuda "$OUT/wrapper_cuda.json" \
  > "$OUT/wrapper_cuda.log" 2>&1; echo "wrapper_cuda rc=$?"
TRITON_DEFAULT_FP_FUSION=0 DANLU_OPINFO_SECONDS=${DANLU_OPINFO_SECONDS:-40} timeout 170 \
  python3 triton_cases.py cuda "$OUT/cases_cuda.json" > "$OUT/cases_cuda.log" 2>&1
echo "cases_cuda rc=$?"
wait
tail -2 "$OUT/pytest_triton.txt"
timeout ${GPT_TIMEOUT:-260} python3 triton_gpu_check.py "$OUT/gpt2.json" 2>&1 | tee "$OUT/gpt2.log" | tail -12
python3 summarize_gpu_checks.py "$OUT"
