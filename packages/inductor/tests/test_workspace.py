"""C++ graphs keep their intermediate buffers between calls (codegen/workspace.py): results
must stay the caller's (a later call never writes into an earlier call's outputs, nor into a
view of them), values must be right on every call, and a call made while another runs (a
second thread) must get buffers of its own."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.fx as fx

from danlu_inductor import compile_fx

aten = torch.ops.aten


def _chain_graph(view_output: bool):
    """x -> relu(x * 2) -> mm with w -> (+1, and a view of an intermediate as an output)."""
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    a = g.call_function(aten.relu.default, (g.call_function(aten.mul.Tensor, (x, 2.0)),))
    b = g.call_function(aten.exp.default, (a,))
    m = g.call_function(aten.mm.default, (b, w))
    out = g.call_function(aten.add.Tensor, (m, 1.0))
    outs = (out, g.call_function(aten.t.default, (a,))) if view_output else (out,)
    g.output(outs)
    return fx.GraphModule(torch.nn.Module(), g)


def _eager(x, w, view_output):
    a = torch.relu(x * 2)
    out = torch.exp(a) @ w + 1
    return (out, a.t()) if view_output else (out,)


@pytest.mark.parametrize("view_output", [False, True])
def test_kept_buffers_never_reach_the_results(view_output, monkeypatch):
    monkeypatch.delenv("DANLU_CPU_WORKSPACE", raising=False)
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    f64 = torch.float64  # float64: the comparisons test buffers, not rounding
    x = torch.randn(64, 32, generator=gen, dtype=f64)
    w = torch.randn(32, 16, generator=gen, dtype=f64)
    compiled = compile_fx(_chain_graph(view_output), [x, w])
    assert "_ws.get(" in compiled.wrapper_source  # something is kept
    first_in = (x, w)
    first = compiled(*first_in)
    kept = [t.clone() for t in first]
    for _ in range(3):  # later calls must not write into the first call's results
        x2 = torch.randn(64, 32, generator=gen, dtype=f64)
        for got, ref in zip(compiled(x2, w), _eager(x2, w, view_output)):
            torch.testing.assert_close(got, ref)
    for got, ref, before in zip(first, _eager(*first_in, view_output), kept):
        torch.testing.assert_close(got, ref)
        torch.testing.assert_close(got, before)


def test_calls_from_two_threads_get_their_own_buffers():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    w = torch.randn(256, 128, generator=gen)
    x0 = torch.randn(512, 256, generator=gen)
    compiled = compile_fx(_chain_graph(False), [x0, w])
    inputs = [torch.randn(512, 256, generator=gen) for _ in range(8)]
    wrong = []

    def work(k):
        for _ in range(20):
            x = inputs[k]
            (got,) = compiled(x, w)
            if not torch.allclose(got, _eager(x, w, False)[0], rtol=1e-4, atol=1e-3):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_switched_off(monkeypatch):
    monkeypatch.setenv("DANLU_CPU_WORKSPACE", "0")
    x, w = torch.randn(8, 4), torch.randn(4, 3)
    compiled = compile_fx(_chain_graph(False), [x, w])
    assert "_ws" not in compiled.wrapper_source
    torch.testing.assert_close(compiled(x, w)[0], _eager(x, w, False)[0])
