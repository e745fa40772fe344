#!/usr/bin/env bash
# The first device call of a session after a CPU-side one (one start, about 570 s): what the
# fourteenth session left unverified, in order of importance: the build workers' device
# memory after real builds now that they stub Triton's current-stream query (run 66: 8.18
# GiB for 16 workers after builds, nothing before; predicted under 0.5 GiB); the GPU tests
# of the L2-evicted autotuning and the workers, the batch-norm statistics' kernel cases on
# CUDA (shifted sums) and the wrapper cases; ResNet-50 training beside torch.compile
# (predicted: generated kernels 7.42 -> 7.28-7.35 ms on an H100) and LLaMA training
# (5.53 -> 5.42-5.45 ms: the one-hot row sum folded); then ViT's and
# ConvNeXt-T's inference, default and reduce-overhead, with 4 jobs (run 65 skipped their
# reduce-overhead units; compile seconds against torch.compile's, and the column
# reductions' new candidates on ConvNeXt-T).
#
#   OUT=/some/dir bash benchmarks/gpu_session_followup.sh
#
# Writes $OUT/log.txt, worker_startup.json, gpu_tests.txt, kernel_cases.json,
# wrapper_cases.txt, profile_{resnet50,llama}_train.md, suite.md (8 files). Installs the packages
# only when the machine does not have them.
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
(cd packages/inductor/tests && DANLU_CASES=one_hot_row_sum,split_var_mean_outliers,split_var_mean_offset,batch_norm_training_split_stats,batch_norm_training_split_stats_channels_last,batch_norm_training_short_extent_channels_last \
  timeout 90 python3 triton_cases.py cuda "$OUT/kernel_cases.json" > /tmp/dsf-cases.txt 2>&1)
echo "== kernel cases rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
python3 -c "import json,sys; [print(k, v.get('ok'), str(v.get('error', ''))[-300:]) for k, v in json.load(open(sys.argv[1])).items()]" "$OUT/kernel_cases.json" 2>&1 | tee -a "$OUT/log.txt"
(cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsf-wrapper \
  timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsf-wrapper.json > /tmp/dsf-wrapper.log 2>&1)
summarize_wrapper_cases /tmp/dsf-wrapper.json > "$OUT/wrapper_cases.txt" 2>&1
cat "$OUT/wrapper_cases.txt" | tee -a "$OUT/log.txt"
profile_model resnet50 train danlu,torch '{}' 100
profile_model llama train danlu,torch '{}' 80
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
