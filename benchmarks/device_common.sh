# Sourced by the device scripts, from the repository root. Sets what they share: the call's
# start (start), its time limit (LIMIT, default 580 s of the device's 600), unbuffered Python
# output; left() is the seconds still left. install_packages puts the five packages of this
# checkout into the device's Python: the device has no package index, so no dependencies and
# no build isolation; each package's log is /tmp/inst_<package>.log. summarize_wrapper_cases
# prints the wrapper cases' pass count. profile_model runs one gpu_profile.py in what is left.
start=$SECONDS
LIMIT=${LIMIT:-580}
export PYTHONUNBUFFERED=1

left() { echo $((LIMIT - (SECONDS - start))); }
# cap N: N seconds, or what is left of the call less 5 s where that is shorter (a timeout's
# argument; at least 1)
cap() { local l=$(( $(left) - 5 )); l=$(( l < $1 ? l : $1 )); echo $(( l > 1 ? l : 1 )); }

install_packages() {
  local py=${PY:-python3} p
  for p in primtorch dynamo aotautograd inductor compile; do
    "$py" -m pip install -q --no-deps --no-build-isolation -e "packages/$p" >"/tmp/inst_$p.log" 2>&1 \
      || echo "install $p failed (/tmp/inst_$p.log)"
  done
}

# The pass count of `triton_wrapper_cases.py cuda` from its JSON (the script's own output is
# per-case log lines).
summarize_wrapper_cases() {
  "${PY:-python3}" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = {k: str(v.get("error", ""))[-400:] for k, v in r.items() if not v.get("ok")}
print(f"wrapper cases: {len(r)} ran, {len(bad)} failed")
for k, v in bad.items():
    print(" ", k, v)
PY
}

# One `gpu_profile.py` run in what is left of the call: model, mode (train/infer), backends,
# danlu-opt's options (default {}), the fewest seconds worth starting it with (default 60).
# Its log is /tmp/dprof-<model>-<mode>.txt; its summary lines go to $OUT/log.txt, its table
# to $OUT/profile_<model>_<mode>.md.
profile_model() {
  local model=$1 mode=$2 backends=$3 opts=${4:-'{}'} min=${5:-60} budget
  local log="/tmp/dprof-$model-$mode.txt"
  budget=$(( $(left) - 10 ))
  [ "$budget" -gt "$min" ] || { echo "$model: no time left" | tee -a "$OUT/log.txt"; return 1; }
  timeout "$budget" python3 benchmarks/gpu_profile.py --model "$model" --mode "$mode" \
    --backends "$backends" --danlu-options "$opts" --iters 5 --out /tmp/dprof > "$log" 2>&1
  echo "== $model $mode rc=$? at $((SECONDS - start)) s" | tee -a "$OUT/log.txt"
  grep -E "^== |compile phases|first runs|precompiled" "$log" | tee -a "$OUT/log.txt"
  cp "/tmp/dprof/profile_${model}_${mode}.md" "$OUT/" 2>/dev/null || true
}
