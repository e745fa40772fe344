# Sourced by the device scripts, from the repository root. Sets what they share: the call's
# start (start), its time limit (LIMIT, default 580 s of the device's 600), unbuffered Python
# output; left() is the seconds still left. install_packages puts the five packages of this
# checkout into the device's Python: the device has no package index, so no dependencies and
# no build isolation; each package's log is /tmp/inst_<package>.log.
start=$SECONDS
LIMIT=${LIMIT:-580}
export PYTHONUNBUFFERED=1

left() { echo $((LIMIT - (SECONDS - start))); }

install_packages() {
  local py=${PY:-python3} p
  for p in primtorch dynamo aotautograd inductor compile; do
    "$py" -m pip install -q --no-deps --no-build-isolation -e "packages/$p" >"/tmp/inst_$p.log" 2>&1 \
      || echo "install $p failed (/tmp/inst_$p.log)"
  done
}
