#!/usr/bin/env bash
# One device call (600 s) of profiles for what the eighth session changed without a GPU and
# for the models still below 0.9 of torch.compile: LLaMA training with and without the row
# blocks (their partials now summed in groups; the first call now without a second, serial
# compile of every kernel when TRITON_CACHE_DIR is unset, so this script leaves it unset),
# then ResNet-50 and ViT training (split batch-norm statistics in one read, fused step
# counters), each with and without the grouped kernels of graph inputs (option
# group_input_kernels, off by default), beside torch.compile.
#
#   OUT=/some/dir bash benchmarks/gpu_session_vision.sh
#
# Writes $OUT/log.txt and one profile_<model>_train.md per model (at most 8 files). LIMIT
# (default 580 s) bounds the call; each profile gets what is left when it starts.
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_common.sh
[ -n "${SUITE_SKIP_INSTALL:-}" ] || install_packages
OUT=${OUT:-/tmp/danlu-session-vision}
mkdir -p "$OUT"
unset TRITON_CACHE_DIR
export DANLU_CACHE_DIR=/tmp/dsv-cache
rm -rf /tmp/dsv-cache
profile_model llama train danlu,danlu-opt,torch '{"row_block_partials": false}'
profile_model resnet50 train danlu,danlu-opt,torch '{"group_input_kernels": true}'
profile_model vit_base_patch16_224 train danlu,danlu-opt,torch '{"group_input_kernels": true}'
tail -30 "$OUT"/profile_*_train.md 2>/dev/null | grep -E "^\||^==>" | head -60
