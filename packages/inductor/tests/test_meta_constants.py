"""Graphs whose constants lost their values (meta tensors) are refused, never run; the
capture-level entry point runs such programs eagerly instead."""

import pytest
import torch
import torch.fx as fx

from danlu_inductor import compile_fx, inference_backend


def pick_rows(x):
    return x[[0, 2]] * 2 + 1


def test_inference_backend_runs_index_lists_correctly():
    x = torch.randn(4, 5)
    fn = inference_backend(fx.symbolic_trace(pick_rows), [x])
    for shape in [(4, 5), (7, 3)]:
        y = torch.randn(shape)
        torch.testing.assert_close(fn(y), pick_rows(y), rtol=0, atol=0)


def test_compile_fx_refuses_a_meta_constant():
    root = torch.nn.Module()
    root.index = torch.empty(2, dtype=torch.int64, device="meta")
    g = fx.Graph()
    x = g.placeholder("x")
    idx = g.get_attr("index")
    out = g.call_function(torch.ops.aten.index.Tensor, (x, [idx]))
    g.output((out,))
    gm = fx.GraphModule(root, g)
    with pytest.raises(ValueError, match="meta tensor"):
        compile_fx(gm, [torch.randn(4, 5)])
