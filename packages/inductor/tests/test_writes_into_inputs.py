"""Outputs that are the new values of written inputs (``gm.meta["outputs_into_inputs"]``, set
by aotautograd for the inputs a program writes, batch norm's running statistics among them):
the wrapper computes such a value into the input itself when nothing reads the old value
afterwards and the kernel reads only the element it writes; otherwise it allocates as before.
Values are checked against eager on fresh inputs either way."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from danlu_inductor import compile_fx

aten = torch.ops.aten


def _momentum_graph(extra=None):
    """new_stat = stat * 0.9 + mean(x, 0) * 0.1 (a running statistic), out = x - mean; the
    second output is the statistic's new value. ``extra`` adds an output built from the old
    statistic after the update (a later reader) or the old statistic itself."""
    g = fx.Graph()
    x, stat = g.placeholder("x"), g.placeholder("stat")
    mean = g.call_function(aten.mean.dim, (x, [0]))
    new = g.call_function(
        aten.add.Tensor,
        (
            g.call_function(aten.mul.Tensor, (stat, 0.9)),
            g.call_function(aten.mul.Tensor, (mean, 0.1)),
        ),
    )
    outs = [g.call_function(aten.sub.Tensor, (x, mean)), new]
    if extra == "later_reader":
        # the old statistic read by a matmul's epilogue after the update
        outs.append(g.call_function(aten.mv.default, (x, stat)))
    elif extra == "returned":
        outs.append(stat)
    elif extra == "transposed":
        outs[1] = g.call_function(aten.add.Tensor, (stat, g.call_function(aten.t.default, (stat,))))
    g.output(tuple(outs))
    gm = fx.GraphModule(torch.nn.Module(), g)
    gm.meta["input_layouts_fixed"] = True
    gm.meta["outputs_into_inputs"] = {1: 1}
    return gm


def _body(compiled) -> str:
    return compiled.wrapper_source.split("def call", 1)[1]


def _reference(x, stat, extra):
    mean = x.mean(0)
    outs = [x - mean, stat * 0.9 + mean * 0.1]
    if extra == "later_reader":
        outs.append(x @ stat)
    elif extra == "returned":
        outs.append(stat)
    elif extra == "transposed":
        outs[1] = stat + stat.t()
    return outs


@pytest.mark.parametrize("extra", [None, "later_reader", "returned", "transposed"])
def test_new_values_are_computed_into_the_input_only_when_safe(extra):
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    n = 6 if extra == "transposed" else 5
    x = torch.randn(7 if extra != "transposed" else 6, n, generator=gen)
    if extra == "transposed":
        x = torch.randn(4, 6, 6, generator=gen)
    stat = torch.randn(*x.shape[1:], generator=gen)
    compiled = compile_fx(_momentum_graph(extra), [x, stat.clone()])
    in_place = "the new value of input stat, in place" in _body(compiled)
    assert in_place == (extra is None), _body(compiled)
    for _ in range(2):
        x = torch.randn(*x.shape, generator=gen)
        stat = torch.randn(*stat.shape, generator=gen)
        old = stat.clone()
        outs = compiled(x, stat)
        ref = _reference(x, old, extra)
        for got, want in zip(outs, ref):
            torch.testing.assert_close(got, want)
        if in_place:
            assert outs[1].data_ptr() == stat.data_ptr()  # the input holds the new value
            torch.testing.assert_close(stat, ref[1])
        else:
            torch.testing.assert_close(stat, old)  # untouched: the caller writes it back


def test_without_the_promise_the_input_is_not_written():
    # an input whose layout the caller does not promise may reach the kernels as a checked
    # copy, which would take the write instead of the caller's tensor
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    gm = _momentum_graph()
    del gm.meta["input_layouts_fixed"]
    x, stat = torch.randn(7, 5, generator=gen), torch.randn(5, generator=gen)
    compiled = compile_fx(gm, [x, stat])
    assert "in place" not in _body(compiled) or "input stat" not in _body(compiled)
    old = stat.clone()
    outs = compiled(x, stat)
    torch.testing.assert_close(outs[1], old * 0.9 + x.mean(0) * 0.1)
    torch.testing.assert_close(stat, old)
