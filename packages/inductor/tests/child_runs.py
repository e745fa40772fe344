"""Run a case script once per test session in a child process and share its JSON results.

Triton's interpreter must be chosen before triton is imported, so the Triton cases run in
child processes. Under pytest-xdist several workers may ask for the same results: the first
runs the child, the others wait on a file lock and read its output.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import traceback

from filelock import FileLock

HERE = pathlib.Path(__file__).parent


def run_once(tmp_path_factory, key, script, mode, env_extra, timeout=600):
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid:  # one folder for all workers of this session
        root = pathlib.Path(tempfile.gettempdir()) / f"danlu_inductor_tests_{uid}"
    else:
        root = tmp_path_factory.getbasetemp()
    out_dir = root / f"child_{key}"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "results.json"
    with FileLock(str(out_dir / "lock")):
        if not out.exists():
            env = dict(os.environ)
            env["DANLU_CACHE_DIR"] = str(out_dir / "cache")
            env["TRITON_DEFAULT_FP_FUSION"] = "0"
            env.pop("TRITON_INTERPRET", None)
            env.update(env_extra)
            proc = subprocess.run(
                [sys.executable, str(HERE / script), mode, str(out)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if proc.returncode != 0 or not out.exists():
                (out_dir / "stderr.txt").write_text(proc.stderr)
                raise AssertionError(proc.stderr[-4000:])
    return json.loads(out.read_text())


# The Triton cases on a CPU: every kernel in the interpreter, and also compiled ahead of time
# for sm_90 in the compile worker processes.
TRITON_ON_CPU_ENV = {
    "TRITON_INTERPRET": "1",
    "DANLU_INDUCTOR_TRITON_ON_CPU": "1",
    "DANLU_INDUCTOR_TRITON_CHECK_TARGET": "90",
    "DANLU_COMPILE_THREADS": "2",
}


def ok(result: dict) -> dict:
    """A case's result, after asserting it ran (else the child's traceback is the message)."""
    assert result["ok"], result.get("error")
    return result


def record_cases(names, run_one, out_path) -> None:
    """The child side: ``run_one(name)`` for each case (its dict of facts, or an exception),
    timed, all written to ``out_path`` as JSON."""
    results = {}
    for name in names:
        t0 = time.perf_counter()
        try:
            results[name] = {"ok": True, **run_one(name)}
        except Exception:
            results[name] = {"ok": False, "error": traceback.format_exc()[-3000:]}
        results[name]["seconds"] = round(time.perf_counter() - t0, 2)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
