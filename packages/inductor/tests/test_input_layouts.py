"""The wrapper's input layout check: a graph input whose strides differ from the example's is
copied into the example's layout (the kernels were built for it), unless the caller promises
every call has the examples' sizes and strides (``gm.meta["input_layouts_fixed"]``, set by
aotautograd for its static programs), in which case the check is left out of the wrapper."""

from __future__ import annotations

import torch
import torch.fx as fx

from danlu_inductor import compile_fx

aten = torch.ops.aten


def _graph():
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    mm = g.call_function(aten.mm.default, (x, w))
    g.output((g.call_function(aten.add.Tensor, (g.call_function(aten.relu.default, (mm,)), 1.0)),))
    return fx.GraphModule(torch.nn.Module(), g)


def _body(compiled) -> str:
    return compiled.wrapper_source.split("def call", 1)[1]


def test_inputs_are_checked_unless_their_layouts_are_promised():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(8, 4, generator=gen).t()  # (4, 8), strides (1, 4)
    w = torch.randn(8, 3, generator=gen)
    checked = compile_fx(_graph(), [x, w])
    assert _body(checked).count("ensure_layout(") == 2
    # another layout than the example's: copied into the kernels' layout, values right
    x2 = torch.randn(4, 8, generator=gen)
    torch.testing.assert_close(checked(x2, w)[0], torch.relu(x2 @ w) + 1)

    promised = _graph()
    promised.meta["input_layouts_fixed"] = True
    fixed = compile_fx(promised, [x, w])
    assert "ensure_layout(" not in _body(fixed)
    for _ in range(2):
        x3 = torch.randn(8, 4, generator=gen).t()
        torch.testing.assert_close(fixed(x3, w)[0], torch.relu(x3 @ w) + 1)
