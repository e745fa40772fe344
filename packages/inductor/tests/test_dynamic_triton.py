"""Dynamic shapes on the Triton path without a GPU: graphs traced with symbolic sizes compile
to Triton kernels that take the sizes as i64 arguments (no specialisation), run in Triton's
interpreter at several sizes against eager (DANLU_INDUCTOR_TRITON_ON_CPU=1), and each kernel
compiles ahead of time for sm_90 once. The cases live in triton_dynamic_cases.py and run once,
in a child process."""

from __future__ import annotations

import pytest

pytest.importorskip("triton", reason="the Triton backend needs the 'triton' extra")

from child_runs import TRITON_ON_CPU_ENV, ok, run_once  # noqa: E402
from triton_dynamic_cases import CASES, KERNEL_COUNTS, NO_FALLBACKS, STORE_COUNTS  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_once(
        tmp_path_factory, "triton_dynamic_cpu", "triton_dynamic_cases.py", "cpu", TRITON_ON_CPU_ENV
    )


@pytest.mark.parametrize("name", list(CASES))
def test_symbolic_graph_matches_eager_at_every_size(results, name):
    r = ok(results[name])
    assert r["kernels"] >= 1 and r["sizes"] >= 5
    assert r["symbolic_args"], "sizes must be i64 kernel arguments, not specialised"
    if name in KERNEL_COUNTS:
        assert r["kernels"] == KERNEL_COUNTS[name], r
    if name in STORE_COUNTS:
        assert r["stores"] == STORE_COUNTS[name], r
    if name in NO_FALLBACKS:
        assert not r["aten_fallbacks"], r


@pytest.mark.parametrize("name", list(CASES))
def test_every_symbolic_kernel_compiles_once_for_sm90(results, name):
    r = ok(results[name])
    aot = r["aot"]
    assert sorted(a["kernel"] for a in aot) == sorted({a["kernel"] for a in aot})  # once each
    assert len(aot) == r["kernels"], aot
    assert all(a["error"] is None and a["ptx"] and a["cubin"] > 0 for a in aot), aot


def test_training_forward_backward(results):
    r = ok(results["mlp_training"])
    if "skipped" in r:
        pytest.skip(r["skipped"])
    assert r["graphs"] == 2 and r["kernels"] >= 2


def test_symbolic_int_argument_forward_backward(results):
    r = ok(results["int_argument"])
    if "skipped" in r:
        pytest.skip(r["skipped"])
    assert r["graphs"] == 2 and r["kernels"] >= 2 and r["int_in_forward"]
    assert len(r["aot"]) == r["kernels"], r["aot"]  # each kernel built for sm_90 once
    assert all(a["error"] is None and a["cubin"] > 0 for a in r["aot"]), r["aot"]
