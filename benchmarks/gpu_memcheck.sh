#!/usr/bin/env bash
# Memory safety of generated code on the GPU machine: small-size versions of every suite model
# (training and inference, a few steps each, fresh inputs every step, compared to eager) under
# `compute-sanitizer --tool memcheck`, one process per model and mode; then the Triton test
# subset. Prints one line per model and mode; logs go to $OUT. Run it after every change to
# GPU code generation, buffer reuse, aliasing or views.
#
#   OUT=/some/dir bash benchmarks/gpu_memcheck.sh                 # every model, both modes
#   MODELS="llama qwen2" MODES=train bash benchmarks/gpu_memcheck.sh
#   SANITIZER=0 FULL=1 MODELS=llama bash benchmarks/gpu_memcheck.sh   # issue sizes, no sanitizer
#
# The caching allocator is off under the sanitizer (PYTORCH_NO_CUDA_MEMORY_CACHING=1): every
# tensor is its own allocation, so a write past a buffer's end is caught instead of landing in
# a neighbour inside the same cached block.
set -u
OUT=${OUT:-/tmp/danlu-memcheck}
PY=${PYTHON:-python3}
MODELS=${MODELS:-"gpt2 bert llama qwen2 t5 resnet50 vit_base_patch16_224 convnext_tiny swin_t"}
MODES=${MODES:-"train infer"}
STEPS=${STEPS:-3}
PER_RUN=${PER_RUN:-240}
SANITIZER=${SANITIZER:-1}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export DANLU_CACHE_DIR=${DANLU_CACHE_DIR:-/tmp/danlu-cache}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  for p in primtorch dynamo aotautograd inductor compile; do
    "$PY" -m pip install -q --no-deps --no-build-isolation -e "packages/$p" \
      >"$OUT/install_$p.log" 2>&1 || echo "gpu_memcheck: install of packages/$p failed"
  done
fi

size_args=()
[ "${FULL:-0}" = 1 ] && size_args=(--full)
[ -n "${LAYERS:-}" ] && size_args+=(--layers "$LAYERS")
summary="$OUT/memcheck_summary.txt"
: >"$summary"
for model in $MODELS; do
  for mode in $MODES; do
    log="$OUT/${model}_${mode}.log"
    cmd=("$PY" benchmarks/gpu_memcheck.py --model "$model" --mode "$mode" --steps "$STEPS"
      "${size_args[@]}")
    start=$SECONDS
    if [ "$SANITIZER" = 1 ]; then
      PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 "$PER_RUN" compute-sanitizer \
        --tool memcheck --print-limit 20 --error-exitcode 99 "${cmd[@]}" >"$log" 2>&1
    else
      timeout -k 10 "$PER_RUN" "${cmd[@]}" >"$log" 2>&1
    fi
    rc=$?
    rec=$(grep '^@@memcheck ' "$log" | tail -1 | cut -c12-)
    status=$(printf '%s' "$rec" | "$PY" -c 'import json,sys
t=sys.stdin.read().strip()
r=json.loads(t) if t else {}
bad=[m for s in r.get("steps",[]) for m in s.get("mismatches",[])]
print(r.get("status","no record"), r.get("reason","")[:160], "; ".join(bad[:2])[:200])')
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -Eo '[0-9]+')
    [ "$SANITIZER" = 1 ] || errors="n/a"
    [ "$rc" = 124 ] && status="timeout after ${PER_RUN} s; $status"
    line=$(printf '%-22s %-6s rc=%-3s sanitizer_errors=%-4s %4ss  %s' "$model" "$mode" "$rc" \
      "${errors:-?}" "$((SECONDS - start))" "$status")
    echo "$line" | tee -a "$summary"
    # the first sanitizer reports name the kernel and the address
    grep -m 3 -A 6 '^========= Invalid\|^========= Program hit' "$log" >>"$OUT/${model}_${mode}.first_errors" 2>/dev/null
  done
done
if [ "${GPU_TESTS:-0}" = 1 ]; then
  (cd packages/inductor/tests && timeout 300 "$PY" -m pytest -q -n 4 -p no:cacheprovider \
    test_triton_wrapper.py test_triton_codegen.py >"$OUT/pytest_triton.log" 2>&1)
  echo "triton tests: rc=$? $(tail -1 "$OUT/pytest_triton.log")" | tee -a "$summary"
fi
