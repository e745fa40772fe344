"""``as_strided`` counts its storage offset from the start of the storage, while compiled
kernels address an input from its data pointer: an input that is a view with an offset
(a slice of a bigger tensor) must not be shifted twice."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from danlu_inductor import compile_fx

aten = torch.ops.aten


def _graph(slice_first: bool):
    g = fx.Graph()
    x = g.placeholder("x")
    src = g.call_function(aten.slice.Tensor, (x, 0, 2, None)) if slice_first else x
    v = g.call_function(aten.as_strided.default, (src, [3, 4], [1, 3], 5))
    g.output((g.call_function(aten.mul.Tensor, (v, 2.0)),))
    return fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize("slice_first", [False, True])
@pytest.mark.parametrize("offset", [0, 3, 7])
def test_as_strided_of_an_offset_input_matches_eager(slice_first, offset):
    gen = torch.Generator().manual_seed(1000 + offset)
    base = torch.randn(64, generator=gen)
    x = base[offset : offset + 40]
    gm = _graph(slice_first)
    compiled = compile_fx(gm, [x])
    torch.testing.assert_close(compiled(x)[0], gm(x)[0])
    assert compiled.report["fallback_calls"] == 0
