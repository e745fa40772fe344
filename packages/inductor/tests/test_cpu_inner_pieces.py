"""C++ pointwise kernels whose loads clamp the inner index (cat, constant padding) run one
inner loop per piece of the row (codegen/cpp/kernel.py ``_inner_pieces``): checked against
eager on fresh, non-contiguous and bf16 inputs, and by the loops in the generated source."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from helpers import check_same


def _inner_loops(src: str) -> list[str]:
    return re.findall(r"for \(int64_t (x\d+) = (-?\d+); \1 < (\d+);", src)


def test_cat_of_three_along_the_inner_dim_loads_each_input_in_its_own_loop():
    # the backward of qkv.split(d): three gradients written side by side
    q, k, v = (torch.randn(4, 32, 48) for _ in range(3))

    def f(q, k, v):
        return torch.cat([q * 2, k + 1, v * 3], -1)

    compiled = check_same(f, q, k, v)
    src = compiled.kernel_source
    starts = [(int(a), int(b)) for _, a, b in _inner_loops(src) if b != "128"]
    assert (0, 48) in starts and (48, 96) in starts and (96, 144) in starts, src
    assert "std::min" not in src, src  # no clamped load left in the loops


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cat_of_non_contiguous_inputs_of_unequal_widths(dtype):
    a = torch.randn(6, 40, dtype=dtype).t()  # [40, 6], transposed
    b = torch.randn(40, 17, dtype=dtype)
    c = torch.randn(40, 64, dtype=dtype)[:, ::2]  # [40, 32], strided
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else {}
    check_same(lambda a, b, c: torch.cat([a.exp(), b, c * c], 1), a, b, c, **tol)


def test_cat_along_an_outer_dim_is_unchanged():
    x, y = torch.randn(3, 5, 40), torch.randn(2, 5, 40)
    check_same(lambda x, y: torch.cat([x + 1, y], 0), x, y)


def test_constant_padding_of_rows_runs_edges_and_middle_apart():
    x = torch.randn(2, 3, 20, 30)

    def f(x):
        return F.pad(x.relu(), (2, 3, 1, 1), value=-0.5)

    compiled = check_same(f, x)
    loops = {(int(a), int(b)) for _, a, b in _inner_loops(compiled.kernel_source)}
    assert {(0, 2), (2, 32), (32, 35)} <= loops, compiled.kernel_source


def test_pieces_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("DANLU_CPP_PIECES", "0")
    q, k = torch.randn(4, 32), torch.randn(4, 32)
    compiled = check_same(lambda q, k: torch.cat([q, k * 2], -1), q, k)
    assert "std::min" in compiled.kernel_source
