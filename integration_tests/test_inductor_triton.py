"""Training through danlu-aotautograd with danlu-inductor's Triton backend, without a GPU.

The Triton path (wrapper, launchers, kernels) runs on CPU tensors under Triton's interpreter
(DANLU_INDUCTOR_TRITON_ON_CPU=1 TRITON_INTERPRET=1, in a child process: the interpreter is
chosen when triton is imported), and every kernel also compiles ahead of time for sm_90
(DANLU_INDUCTOR_TRITON_CHECK_TARGET=90). Loss and gradients are compared with float64 eager.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="danlu-inductor's Triton backend needs triton")
pytest.importorskip("danlu_aotautograd", reason="danlu-aotautograd is not installed")


@pytest.mark.parametrize("block", ["gpt2", "llama"])
def test_transformer_block_training_step_on_the_triton_path(tmp_path, block):
    env = dict(os.environ)
    env.update(
        TRITON_INTERPRET="1",
        DANLU_INDUCTOR_TRITON_ON_CPU="1",
        DANLU_INDUCTOR_TRITON_CHECK_TARGET="90",
        DANLU_COMPILE_THREADS="2",
        DANLU_CACHE_DIR=str(tmp_path / "cache"),
        TRITON_DEFAULT_FP_FUSION="0",
    )
    out = tmp_path / "out.json"
    script = pathlib.Path(__file__).parent / "triton_training_case.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(out), block],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(out.read_text())
    graphs = r["graphs"]
    assert len(graphs) == 2, graphs  # forward and backward
    for g in graphs:
        assert g["backend"] == "triton" and g["kernels"] >= 3, g
        assert not g["triton_fallbacks"] and g["fallback_reason"] is None, g
    bad = {k: v for k, v in r["errors"].items() if not v < 1e-4}
    assert not bad, bad
