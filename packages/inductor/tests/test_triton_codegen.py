"""Triton backend: every case in triton_cases.py runs under the Triton interpreter against
eager (float64 reference for fp32), and every generated kernel compiles ahead of time for
sm_90 to PTX and cubin. Each mode runs once per session in a child process (child_runs.py):
the interpreter must be switched on before triton is imported.
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton", reason="the Triton backend needs the 'triton' extra")

from child_runs import run_once  # noqa: E402
from opinfo_cases import OPS  # noqa: E402
from triton_cases import CASES  # noqa: E402


def _run(mode, tmp_path_factory):
    # CPU tensors stand for GPU ones: traced as GPU graphs are (decompositions kept for GPUs
    # only, such as max pooling's gradient as a gather, apply)
    env = {"DANLU_INDUCTOR_TRITON_ON_CPU": "1"}
    if mode == "interpret":
        env["TRITON_INTERPRET"] = "1"
    return run_once(tmp_path_factory, f"triton_{mode}", "triton_cases.py", mode, env, timeout=300)


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    return _run("interpret", tmp_path_factory)


@pytest.fixture(scope="module")
def aot(tmp_path_factory):
    return _run("aot", tmp_path_factory)


@pytest.mark.parametrize("name", list(CASES))
def test_interpreted_matches_eager(interpreted, name):
    r = interpreted[name]
    assert r["ok"], r.get("error")
    assert r["kernels"] >= 1


def test_out_of_bounds_gather_raises(interpreted):
    r = interpreted["out_of_bounds"]
    assert r["ok"], r.get("error")
    assert "index out of range" in r["raised"]


def test_opinfo_sweep_ran(interpreted):
    r = interpreted["opinfo"]
    assert r["ok"], r.get("error")
    assert sum(r["samples"].values()) > 700


@pytest.mark.parametrize("op", OPS)
def test_opinfo_samples_match_eager(interpreted, op):
    """First OpInfo sample per dtype (float32/float64/int64/bool), contiguous and strided."""
    r = interpreted["opinfo"]
    assert r["ok"], r.get("error")
    assert r["samples"].get(op, 0) > 0, f"no OpInfo sample of {op} was traced"
    assert r["failures"].get(op, []) == []


@pytest.mark.parametrize("name", list(CASES))
def test_aot_compiles_for_sm90(aot, name):
    r = aot[name]
    assert r["ok"], r.get("error")
    assert r["kernels"] and all(k["cubin"] > 0 for k in r["kernels"]), r


def test_kernel_kinds_cover_the_plan(interpreted):
    kinds = set()
    for name in CASES:
        kinds |= set(interpreted[name].get("kinds", []))
    assert kinds == {
        "pointwise",
        "pointwise_2d",
        "persistent_reduction",
        "reduction",
        "outer_reduction",
    }
