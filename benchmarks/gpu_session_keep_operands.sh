#!/usr/bin/env bash
# The first device call after the sixteenth session (one start, about 570 s): what it left
# unverified, in order of importance: the C++ replay-address check (danlu_inductor.
# _replay_checks) and the field-reading tensor guard, built on the device (their tests, and
# the host time of a reduce-overhead call: predicted ResNet-50 CUDA graph runner 98 -> 50-65
# us, host 292 -> 240-260 us); then the opt-in partition experiment
# DANLU_KEEP_LIBRARY_OPERANDS=1 against the default, on LLaMA's and ResNet-50's training
# steps beside torch.compile (predicted: LLaMA generated kernels -0.10 to -0.20 ms a step,
# ResNet-50's -0.05 to -0.15 ms; memory up 5-15%).
#
#   OUT=/some/dir bash benchmarks/gpu_session_keep_operands.sh
#
# Writes $OUT/log.txt, tests.txt, host.json, profile_{llama,resnet50}_train{,_keep}.md
# (7 files). LIMIT (default 570 s).
set -u
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-570}
source benchmarks/device_common.sh
install_packages
OUT=${OUT:-/tmp/danlu-session-keep}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=/tmp/dsk-triton DANLU_CACHE_DIR=/tmp/dsk-cache
python3 -c "import torch; from danlu_dynamo.capture import guard_codegen as g; \
from danlu_inductor import cudagraphs as c; print('field guard:', g._direct_checks is not None, \
'replay check:', c._same_addresses is not None)" 2>&1 | tee -a "$OUT/log.txt"
{ (cd packages/dynamo && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_guard_checks.py 2>&1 | tail -2)
  (cd packages/inductor && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_replay_checks.py 2>&1 | tail -2)
  (cd packages/inductor/tests && TRITON_DEFAULT_FP_FUSION=0 DANLU_CACHE_DIR=/tmp/dsk-wrapper \
    timeout 90 python3 triton_wrapper_cases.py cuda /tmp/dsk-wrapper.json > /tmp/dsk-wrapper.log 2>&1)
  summarize_wrapper_cases /tmp/dsk-wrapper.json; } > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt" | tee -a "$OUT/log.txt"
timeout 120 python3 benchmarks/probes/host_call_split.py --models resnet50,convnext_tiny \
  --out "$OUT/host.json" > /tmp/dsk-host.txt 2>&1
echo "== host split rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
grep -E "^(resnet50|convnext)" /tmp/dsk-host.txt | tee -a "$OUT/log.txt"
for model in llama resnet50; do
  profile_model $model train danlu,torch '{}' 80
  mv "$OUT/profile_${model}_train.md" /tmp/dsk-default.md 2>/dev/null
  DANLU_KEEP_LIBRARY_OPERANDS=1 profile_model $model train danlu '{}' 60
  mv "$OUT/profile_${model}_train.md" "$OUT/profile_${model}_train_keep.md" 2>/dev/null
  mv /tmp/dsk-default.md "$OUT/profile_${model}_train.md" 2>/dev/null
done
