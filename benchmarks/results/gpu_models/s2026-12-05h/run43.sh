#!/usr/bin/env bash
# session 2026-12-05 (eighth), call 1: kernel cases of the last session's unrun changes (row-block
# partials, online softmax, logsumexp) on CUDA, opinfo sweep (60 s), the softmax-rows and
# embedding-gradient micros, then LLaMA training profile A/B row_block_partials on/off vs torch.
set -u
source benchmarks/device_common.sh
install_packages
python3 -m pip install -q --no-deps .whl/expecttest-0.3.0-py3-none-any.whl > /dev/null 2>&1
T=packages/inductor/tests
(cd $T && DANLU_CASES=row_blocks,softmax,logsumexp,embedding_grad,rms,layer_norm,opinfo TRITON_DEFAULT_FP_FUSION=0 \
  DANLU_OPINFO_SECONDS=60 DANLU_CACHE_DIR=/tmp/r43c timeout 170 python3 triton_cases.py cuda /tmp/cc.json > /tmp/cc.log 2>&1)
python3 - > $OUT/checks.txt 2>&1 <<'PY'
import json
r = json.load(open("/tmp/cc.json"))
bad = {k: str(v.get("error", v.get("failures", "")))[-800:] for k, v in r.items() if not v.get("ok") or (k == "opinfo" and v.get("failures"))}
print(f"kernel cases: {len(r)} ran, {len(bad)} failed or with failures: {sorted(r)}")
for k, v in bad.items(): print(" ", k, v)
for k, v in r.items():
    if k != "opinfo": print(k, {a: b for a, b in v.items() if a != "error"})
print("opinfo", {a: b for a, b in r.get("opinfo", {}).items() if a != "failures"})
PY
tail -5 /tmp/cc.log >> $OUT/checks.txt
echo "checks at $((SECONDS - start)) s" | tee -a $OUT/checks.txt; cat $OUT/checks.txt
(cd benchmarks && timeout 90 python3 gpu_softmax_rows.py > $OUT/micros.txt 2>&1; timeout 60 python3 gpu_embedding_grad.py >> $OUT/micros.txt 2>&1)
cat $OUT/micros.txt; echo "micros at $((SECONDS - start)) s"
DANLU_CACHE_DIR=/tmp/r43p timeout $(( $(left) - 10 )) python3 benchmarks/gpu_profile.py --model llama --mode train \
  --backends danlu,danlu-opt,torch --danlu-options '{"row_block_partials": false}' --iters 5 --out /tmp/r43p > $OUT/prof_llama_ab.txt 2>&1
echo "profile rc=$? at $((SECONDS - start)) s"
grep -v "^\s*$" $OUT/prof_llama_ab.txt | tail -80
ls /tmp/r43p
