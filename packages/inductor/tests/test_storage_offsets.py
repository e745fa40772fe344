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


def _mm_of_transposed_input():
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    xt = g.call_function(aten.t.default, (x,))
    g.output((g.call_function(aten.mm.default, (xt, w)),))
    return fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize("offset", [0, 5])
def test_library_kernel_gets_a_view_at_the_input_offset(offset):
    # the view handed to the matmul library is built with as_strided, counted from the
    # storage's start: the input's own offset must be added
    gen = torch.Generator().manual_seed(2000 + offset)
    x = torch.randn(40, generator=gen)[offset : offset + 12].view(4, 3)
    w = torch.randn(4, 2, generator=gen)
    gm = _mm_of_transposed_input()
    compiled = compile_fx(gm, [x, w])
    torch.testing.assert_close(compiled(x, w)[0], x.t() @ w)
    x2 = torch.randn(40, generator=gen)[offset : offset + 12].view(4, 3)
    torch.testing.assert_close(compiled(x2, w)[0], x2.t() @ w)


def test_fallback_result_that_is_an_offset_view_feeds_a_kernel():
    # as_strided of a non-contiguous input is not lowered: ATen computes it, and its result is
    # a view that starts 2 elements in; the kernel reading it must not add the 2 again
    g = fx.Graph()
    x = g.placeholder("x")
    v = g.call_function(aten.as_strided.default, (x, [4], [14], 2))
    g.output((g.call_function(aten.add.Tensor, (v, 1.0)),))
    gm = fx.GraphModule(torch.nn.Module(), g)
    x = torch.arange(48.0).view(4, 12)[:, ::2]
    compiled = compile_fx(gm, [x])
    torch.testing.assert_close(compiled(x)[0], gm(x)[0])


def test_efficient_zero_tensor_is_zeros():
    # autograd's zero placeholder has no memory: it must never reach a kernel as a buffer
    g = fx.Graph()
    t = g.placeholder("t")
    z = g.call_function(
        aten._efficientzerotensor.default, ([4, 6],), {"dtype": torch.float32, "device": "cpu"}
    )
    g.output((g.call_function(aten.add.Tensor, (g.call_function(aten.mul.Tensor, (t, 2)), z)),))
    gm = fx.GraphModule(torch.nn.Module(), g)
    t = torch.randn(4, 6)
    compiled = compile_fx(gm, [t])
    torch.testing.assert_close(compiled(t)[0], t * 2)
    assert compiled.report["fallback_calls"] == 0
