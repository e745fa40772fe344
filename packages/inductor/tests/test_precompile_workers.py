"""The parallel Triton compile workers start without the user's main module: a script with
no ``if __name__ == "__main__":`` guard is run once, not again in every worker (spawned
workers used to import it, re-running the model and failing with multiprocessing's
"bootstrapping phase" error, so every kernel compiled serially on its first launch)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from child_runs import TRITON_ON_CPU_ENV

HERE = pathlib.Path(__file__).parent

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import torch
from helpers import aten_graph
from danlu_inductor import compile_fx
from danlu_inductor.codegen.triton import precompile

print("top-level code ran", flush=True)

def fn(x, y):
    a = (x.sin() + y).relu()
    return a.sum(1), (x * y).cos().amax(0), torch.softmax(a, -1)

inputs = [torch.randn(33, 70), torch.randn(33, 70)]
compiled = compile_fx(aten_graph(fn, *inputs), inputs)
got, want = compiled(*inputs), fn(*inputs)
assert all(torch.allclose(g, w, atol=1e-5) for g, w in zip(got, want))
assert precompile._POOL is not None, "the kernels were not compiled in worker processes"
print("kernels", compiled.num_kernels, flush=True)
"""


def test_unguarded_script_runs_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tests=str(HERE)))
    env = {**os.environ, **TRITON_ON_CPU_ENV, "DANLU_CACHE_DIR": str(tmp_path / "cache")}
    env["TRITON_DEFAULT_FP_FUSION"] = "0"
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("top-level code ran") == 1, proc.stdout + proc.stderr[-2000:]
    assert "parallel Triton compile failed" not in proc.stderr, proc.stderr[-2000:]
    assert "bootstrapping" not in proc.stderr
    assert "kernels" in proc.stdout
