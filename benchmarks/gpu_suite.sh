#!/usr/bin/env bash
# The GPU model suite on the GPU machine (H200, CPython 3.12, torch 2.11, triton 3.6):
# installs the five danlu packages from this checkout, then runs benchmarks/gpu_models.py with
# the arguments given, writing results.json, table.md, speedups.png and run.log to $OUT.
#
# Usage (from the repo root):  OUT=/some/dir bash benchmarks/gpu_suite.sh --models gpt2,bert
#
# One device command may run 600 s. The suite is told to stop starting models SUITE_MARGIN s
# (default 60) before SUITE_LIMIT (default 585 s from this script's start, installs included),
# and is interrupted (SIGINT) at SUITE_LIMIT - 35 s and killed 30 s later; when interrupted it
# marks what it did not measure as skipped and writes its files (exit 124).
set -u
start=$SECONDS
OUT=${OUT:-/tmp/danlu-gpu-models}
PY=${PYTHON:-python3}
mkdir -p "$OUT"

export PYTHONUNBUFFERED=1
# NVLink multicast stays off on these shared hosts (KINDS.md), also for a one-GPU run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Caches on the machine's own disk, fresh on every machine: compile times are cold ones.
export DANLU_CACHE_DIR=${DANLU_CACHE_DIR:-/tmp/danlu-cache}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor-cache}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
# Nothing outside the machine can be reached; models are built from configs.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# SUITE_SKIP_INSTALL=1: the packages are installed already (a development machine).
if [ "${SUITE_SKIP_INSTALL:-0}" != 1 ]; then
  for p in primtorch dynamo aotautograd inductor compile; do
    "$PY" -m pip install -q --no-deps --no-build-isolation -e "packages/$p" \
      >"/tmp/gpu_suite_install_$p.log" 2>&1 \
      || { echo "gpu_suite: install of packages/$p failed:"; tail -20 "/tmp/gpu_suite_install_$p.log"; }
  done
fi
"$PY" - <<'EOF'
import importlib.metadata as md
import torch
names = ("triton", "transformers", "timm", "danlu", "danlu-inductor")
versions = []
for n in names:
    try:
        versions.append(f"{n} {md.version(n)}")
    except md.PackageNotFoundError:
        versions.append(f"{n} missing")
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
print("gpu_suite:", f"torch {torch.__version__}", *versions, gpu, sep=" | ")
EOF

limit=${SUITE_LIMIT:-585}
left=$((limit - (SECONDS - start)))
deadline=$((left - ${SUITE_MARGIN:-60}))
echo "gpu_suite: installs took $((SECONDS - start)) s; suite deadline ${deadline} s"
set -o pipefail
timeout -s INT -k 30 "$((left - 35))" \
  "$PY" benchmarks/gpu_models.py --deadline "$deadline" --out "$OUT" "$@" 2>&1 \
  | tee "$OUT/run.log"
rc=$?
echo "gpu_suite: exit $rc after $((SECONDS - start)) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
