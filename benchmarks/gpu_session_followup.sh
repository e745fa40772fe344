#!/usr/bin/env bash
# The first device call of a session after a CPU-side one (one start, about 570 s): what the
# thirteenth session changed, checked and measured, in order of importance, each in what is
# left: the interpreted kernel cases of the unrolled short reductions and the unchecked
# constant-table gathers on CUDA, the wrapper cases; the build pools' start (spawned workers
# against workers forked from one helper process); LLaMA, T5 and ResNet-50 training beside
# torch.compile (the predictions in docs/benchmarks.md, H100: LLaMA's grouped-query sums
# 0.78 -> 0.2-0.25 ms a step; ResNet-50's generated kernels 8.10 -> 7.6-7.85 ms from the
# one-pass norm statistics and the folded chunk indices); then a cold reduce-overhead compile
# of ViT inference with one job (compile time against torch.compile's).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, kernel_cases.json, wrapper_cases.txt, worker_startup.json,
# profile_{llama,t5,resnet50}_train.md, ro_cold.md (8 files). Installs the packages only when
# the machine does not have them (a warm machine from an earlier call does).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
(cd packages/inductor/tests && DANLU_CASES=short_reductions_unrolled,max_pool_backward_gather,gather_dim1,embedding_gather \
  timeout 90 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsf-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
python3 -c "import json,sys; [print(k, v.get('ok'), str(v.get('error', ''))[-300:]) for k, v in json.load(open(sys.argv[1])).items()]" "$OUT/kernel_cases.json" 2>&1 | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsf-wrapper \
  timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsf-wrapper.json > /tmp/dsf-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dsf-wrapper.json > "$OUT/wrapper_cases.txt" 2>&1
python3 -c "import json; print('artifact_roundtrip:', json.load(open('/tmp/dsf-wrapper.json')).get('artifact_roundtrip'))" >> "$OUT/wrapper_cases.txt" 2>&1
cat "$OUT/wrapper_cases.txt" | tee -a "$OUT/log.txt"
timeout 120 python3 benchmarks/worker_startup.py --workers 16 > "$OUT/worker_startup.json" 2>&1
echo "== worker startup rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
cat "$OUT/worker_startup.json" | tee -a "$OUT/log.txt"
profile_model llama train danlu,torch '{}' 80
profile_model t5 train danlu,torch '{}' 80
profile_model resnet50 train danlu,torch '{}' 100
# a cold reduce-overhead compile, one job (its own cache folders)
budget=$(( $(left) - 15 ))
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
tail -40 "$OUT"/profile_*.md 2>/dev/null | grep -E "^\||^==>" | head -60
