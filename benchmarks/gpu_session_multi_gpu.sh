#!/usr/bin/env bash
# Issue 25's run, one device call on a two-GPU kind (nvidia-h200-x2 or nvidia-h100-x2): GPT-2
# and the LLaMA-style model trained with DDP and with FSDP2, eager vs torch.compile vs
# danlu.compile, one process per GPU (torchrun, NCCL with NVLink multicast off), loss
# agreement over 10 steps, step time, tokens a second, peak memory, first-step time and the
# share of communication time that overlaps other kernels (a profile of 3 steps each).
#
#   OUT=/some/dir bash benchmarks/gpu_session_multi_gpu.sh
#
# Writes $OUT/log.txt (the table) and results.json (MODELS=gpt2 or WRAPS=ddp for a shorter
# run).
set -u
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-580}
source benchmarks/device_common.sh
OUT=${OUT:-/tmp/danlu-multi-gpu}
mkdir -p "$OUT"
install_packages
# NVLink multicast stays off everywhere (the device's rule: it can take the host's GPUs out of
# service); torchrun's ranks inherit these
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  DANLU_CACHE_DIR=/tmp/danlu-cache TRITON_CACHE_DIR=/tmp/triton-cache \
  TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor-cache
nvidia-smi -L | tee -a "$OUT/log.txt"
timeout $(cap 560) python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/multi_gpu.py \
  --device cuda --profile --models "${MODELS:-gpt2,llama}" --wraps "${WRAPS:-ddp,fsdp2}" \
  --out "$OUT" 2>&1 \
  | grep -vE "Warning|warn\(" | tail -40 | tee -a "$OUT/log.txt"
echo "== done rc=${PIPESTATUS[0]} at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
