"""A captured graph whose input is a symbolic int (an int argument the capture made dynamic):
aot_graph traces it once as a symbol of its own (graph input ``primals_int_0``) and serves every
value, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

import danlu_aotautograd as da
from danlu_primtorch.symbolic import ShapeEnv


def _f(x, w, n):
    return torch.tanh(x[:, :n] @ w[:n]) * n


def _captured():
    gm = fx.symbolic_trace(_f)
    env = ShapeEnv(duck_shape=False)
    n = env.create_symbolic_size(5, "L['n']", duck=False)
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name == "n":
            node.meta["val"] = n  # what a capture that made ``n`` dynamic gives
    return gm


def test_one_trace_serves_every_int_value_with_grads():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(6, 20, generator=gen)
    w = torch.randn(20, 4, generator=gen, requires_grad=True)
    seen = []

    def compiler(gm, inputs):
        seen.append(gm)
        return da.run_graph(gm, inputs)

    compiled = da.aot_graph(_captured(), [x, w, 5], compiler)
    aot = compiled.aot_module.aot
    for n in (5, 2, 11, 20, 7):
        out = compiled(x, w, n)
        w_r = w.detach().requires_grad_()
        ref = _f(x, w_r, n)
        torch.testing.assert_close(out, ref)
        (g,) = torch.autograd.grad(out.square().sum(), (w,))
        (g_r,) = torch.autograd.grad(ref.square().sum(), (w_r,))
        torch.testing.assert_close(g, g_r)
    assert aot.stats["traces"] == 1
    forward = seen[0]
    ints = [p for p in forward.graph.nodes if p.op == "placeholder" and "int" in p.name]
    assert [p.name for p in ints] == ["primals_int_0"]
    assert isinstance(ints[0].meta["val"], torch.SymInt)


def test_a_non_int_where_a_symbolic_int_was_captured_runs_eagerly():
    x, w = torch.randn(3, 8), torch.randn(8, 2)
    compiled = da.aot_graph(_captured(), [x, w, 5], da.run_graph, on_unsupported="eager")
    with pytest.warns(UserWarning, match="symbolic int"):
        torch.testing.assert_close(compiled(x, w, True), _f(x, w, True))


def test_a_trace_that_specialises_the_int_is_checked_per_value():
    # canonical decompositions turn roll's shift into an arange bound: the trace specialises
    # the symbol (a guard); every new value must check it and trace again, not reuse
    def roll(x, n):
        return x.roll(n, 0) * 2

    gm = fx.symbolic_trace(roll)
    env = ShapeEnv(duck_shape=False)
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name == "n":
            node.meta["val"] = env.create_symbolic_size(3, "L['n']", duck=False)
    x = torch.randn(12, 4)
    compiled = da.aot_graph(gm, [x, 3], da.run_graph, decompositions="canonical")
    for n in (3, 4, 7, 3):
        torch.testing.assert_close(compiled(x, n), roll(x, n))
    assert compiled.aot_module.aot.stats["traces"] == 3
