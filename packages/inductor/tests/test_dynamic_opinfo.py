"""Every lowering with symbolic sizes: the OpInfo samples of test_opinfo.py traced with
``dynamic=True`` (every dim of every input a symbol, sizes 0/1 specialised), compiled in one
batch and compared with eager. The generated code is the symbolic form (sizes are kernel
arguments), so this checks symbolic indexing, loop bounds and run-time allocation for each op;
the other-size checks live in test_dynamic_cpp.py."""

from __future__ import annotations

import collections
import warnings

import pytest
import torch
from opinfo_cases import build_cases
from test_opinfo import LOOSER

from danlu_inductor import compile_fx_batch


@pytest.fixture(scope="module")
def compiled_cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases, _ = build_cases(dynamic=True)
        compiled = compile_fx_batch([(c["gm"], c["inputs"]) for c in cases])
    return list(zip(cases, compiled))


def test_symbolic_opinfo_matches_eager(compiled_cases):
    failures = []
    for case, compiled in compiled_cases:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = compiled(*[t.clone() for t in case["inputs"]])
            tol = LOOSER.get(case["base"], {})
            torch.testing.assert_close(got, case["expected"], equal_nan=True, **tol)
        except AssertionError as e:
            failures.append(f"{case['id']}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)


def test_symbolic_opinfo_compiles_symbolically(compiled_cases):
    dynamic = [c for _, c in compiled_cases if c.report.get("dynamic")]
    eager = collections.Counter(
        c.report["fallback_reason"] for _, c in compiled_cases if c.report.get("fallback_reason")
    )
    print(f"\n{len(dynamic)} of {len(compiled_cases)} graphs compiled symbolically; eager: {eager}")
    assert len(dynamic) > 1000
    assert not eager, eager  # every sample graph with a symbolic dim compiles symbolically
