#!/usr/bin/env bash
# The first device call of a session after a CPU-side one (one start, about 570 s): what the
# twelfth session changed, checked and measured, in order of importance, each in what is left:
# the interpreted kernel cases of the split batch-norm statistics (one Welford pass a chunk)
# and the wrapper cases (the graph cache's CUDA graph runner round trip among them) on CUDA;
# how long the build workers take to start and what device memory they hold; ResNet-50 and
# LLaMA training beside torch.compile (the predictions in docs/benchmarks.md: batch-norm
# statistics, short-row reductions, the first graph's build wall); then a warm
# reduce-overhead compile of ViT inference (the second of two suite runs sharing caches).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, kernel_cases.json, wrapper_cases.txt, worker_startup.json,
# profile_{resnet50,llama}_train.md, ro_warm.md (7 files). Installs the packages only when
# the machine does not have them (a warm machine from an earlier call does).
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
python3 -c "import danlu, danlu_inductor" 2>/dev/null || install_packages
OUT=${OUT:-/tmp/danlu-session-followup}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsf-triton DANLU_CACHE_DIR=/tmp/dsf-cache
(cd packages/inductor/tests && DANLU_CASES=batch_norm_training_split_stats,batch_norm_training_split_stats_channels_last,batch_norm_training_short_extent_channels_last,conv_backward_bias_grad \
  timeout 90 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsf-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
python3 -c "import json,sys; [print(k, v.get('ok'), str(v.get('error', ''))[-300:]) for k, v in json.load(open(sys.argv[1])).items()]" "$OUT/kernel_cases.json" 2>&1 | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsf-wrapper \
  timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsf-wrapper.json > /tmp/dsf-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dsf-wrapper.json > "$OUT/wrapper_cases.txt" 2>&1
python3 -c "import json; print('artifact_roundtrip:', json.load(open('/tmp/dsf-wrapper.json')).get('artifact_roundtrip'))" >> "$OUT/wrapper_cases.txt" 2>&1
cat "$OUT/wrapper_cases.txt" | tee -a "$OUT/log.txt"
timeout 90 python3 benchmarks/worker_startup.py --workers 16 > "$OUT/worker_startup.json" 2>&1
echo "== worker startup rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
cat "$OUT/worker_startup.json" | tee -a "$OUT/log.txt"
profile_model resnet50 train danlu,torch '{}' 100
profile_model llama train danlu,torch '{}' 80
# a warm reduce-overhead compile: the same suite run twice, the second finding the first's
# graph cache entries and Triton binaries (separate folders from everything above)
for round in cold warm; do
  budget=$(( $(left) - 15 ))
  [ "$budget" -gt 60 ] || { echo "ro $round: no time left" | tee -a "$OUT/log.txt"; break; }
  DANLU_CACHE_DIR=/tmp/dsf-ro-cache TRITON_CACHE_DIR=/tmp/dsf-ro-triton OUT=/tmp/dsf-ro-$round \
    SUITE_SKIP_INSTALL=1 SUITE_LIMIT=$budget bash benchmarks/gpu_suite.sh \
    --models vit_base_patch16_224 --modes infer --backends eager,torch-ro,danlu-ro --jobs 1 \
    --time-budget $((budget - 20)) > /tmp/dsf-ro-$round.txt 2>&1
  echo "== ro $round rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  { echo "### $round"; sed -n '/^| model | mode | eager/,/^$/p' /tmp/dsf-ro-$round/table.md; grep -E "danlu.compile reduce-overhead:" /tmp/dsf-ro-$round/table.md; } >> "$OUT/ro_warm.md" 2>&1
done
cat "$OUT/ro_warm.md" 2>/dev/null
tail -40 "$OUT"/profile_*.md 2>/dev/null | grep -E "^\||^==>" | head -60
