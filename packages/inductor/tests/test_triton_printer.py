"""Triton source details that need no interpreter: index printing, configs, kernel text."""

from __future__ import annotations

import pytest
import sympy
import torch

pytest.importorskip("triton", reason="the Triton backend needs the 'triton' extra")

from danlu_inductor.codegen.triton.heuristics import (  # noqa: E402
    candidate_configs,
    heuristic_config,
)
from danlu_inductor.codegen.triton.printer import constant, texpr  # noqa: E402
from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod, sym  # noqa: E402


def test_texpr_index_functions():
    x0, x1 = sym("x0"), sym("x1")
    assert texpr(FloorDiv(x0, 7)) == "(x0 // 7)"
    assert texpr(IMod(x1, 5)) == "(x1 % 5)"
    assert texpr(Clamp(x0 - 1, 0, 9)) == "tl.minimum(tl.maximum((-1 + x0), 0), 9)"
    assert texpr(sympy.Max(x0, x1, 3)).count("tl.maximum") == 2
    e = eval(texpr(3 * FloorDiv(x0, 4) + IMod(x0, 4)), {"x0": 23})
    assert e == 3 * (23 // 4) + 23 % 4


def test_constants_keep_special_values_and_round_reduced_floats():
    assert 'float("nan")' in constant(float("nan"), torch.float32)
    assert 'float("-inf")' in constant(float("-inf"), torch.float64)
    bf = float(torch.tensor(0.1, dtype=torch.bfloat16).float())
    assert repr(bf) in constant(0.1, torch.bfloat16)


@pytest.mark.parametrize(
    "kind,x,r",
    [("pointwise", 37000, 1), ("persistent_reduction", 1000, 37), ("reduction", 8, 3000)],
)
def test_configs_cover_the_sizes(kind, x, r):
    h = heuristic_config(kind, x, r)
    cands = candidate_configs(kind, x, r)
    assert cands[0] == h and len(set(cands)) == len(cands)
    if kind == "persistent_reduction":
        assert all(c.RBLOCK >= r and c.RBLOCK & (c.RBLOCK - 1) == 0 for c in cands)
    for c in cands:
        assert 1 <= c.num_warps <= 8 and c.XBLOCK >= 1
