"""Every place a compile can fail ends in a correct eager run with the reason recorded: capture,
aotautograd at the backend call and at a later call (dynamic shapes trace lazily), inductor's
lowering and the Triton path, and a kernel launch. Failures are injected where they would
happen; each check compares against eager and reads the reason from the stats or the log."""

from __future__ import annotations

import logging

import pytest
import torch

import danlu
from danlu.fallback import EagerOnFailure


def program(x, w):
    return torch.nn.functional.linear(x.sin(), w).relu() * 2


def _inputs(rows=5):
    torch.manual_seed(0)
    return torch.randn(3, rows, 8).transpose(0, 1), torch.randn(4, 8)  # non-contiguous x


def _run_and_compare(fn, calls=2, rows=(5,)):
    for n in rows:
        x, w = _inputs(n)
        for _ in range(calls):
            torch.testing.assert_close(fn(x, w), program(x, w))


def _only_graph():
    (graph,) = danlu.CompileStats.current().graphs
    return graph


def test_internal_capture_error_runs_the_frame_eagerly(monkeypatch, caplog):
    from danlu_dynamo.capture.output_graph import OutputGraph

    def broken(self, *args, **kwargs):
        raise RuntimeError("injected capture failure")

    monkeypatch.setattr(OutputGraph, "call_op", broken)
    danlu.reset()
    with caplog.at_level(logging.WARNING):
        _run_and_compare(danlu.compile(program))
    assert danlu.CompileStats.current().graphs == []
    assert "injected capture failure" in caplog.text


def test_aotautograd_failure_at_the_backend_call(monkeypatch):
    import danlu_aotautograd.api as api

    def broken(*args, **kwargs):
        raise RuntimeError("injected trace failure")

    monkeypatch.setattr(api, "trace_program", broken)
    danlu.reset()
    _run_and_compare(danlu.compile(program))
    graph = _only_graph()
    assert graph.error.startswith("backend failed: RuntimeError: injected trace failure")
    assert "ran eagerly: backend failed" in danlu.CompileStats.current().summary()


def test_aotautograd_failure_at_a_call_with_dynamic_shapes(monkeypatch, caplog):
    """Dynamic graphs are traced at their first call: a failure there runs the graph eagerly
    from then on (the symbolic matmul of a shifted-window model failed here on CUDA)."""
    import danlu_aotautograd.api as api

    real = api.trace_program
    traces = []

    def fails_when_symbolic(*args, dynamic_dims=None, **kwargs):
        traces.append(dynamic_dims)
        if dynamic_dims is not None:
            raise RuntimeError("Cannot call numel() on tensor with symbolic sizes/strides")
        return real(*args, dynamic_dims=dynamic_dims, **kwargs)

    monkeypatch.setattr(api, "trace_program", fails_when_symbolic)
    danlu.reset()
    with caplog.at_level(logging.WARNING, logger="danlu"):
        _run_and_compare(danlu.compile(program, dynamic=True), rows=(5, 6, 7))
    assert len(traces) == 1  # failed once; the graph then runs eagerly without retrying
    graph = _only_graph()
    assert graph.error.startswith("failed at a call: RuntimeError: Cannot call numel()")
    assert "runs eagerly from now on" in caplog.text
    assert "ran eagerly: failed at a call" in danlu.CompileStats.current().summary()


def test_lowering_failure(monkeypatch):
    from danlu_inductor import graph as lowering

    def broken(self):
        raise RuntimeError("injected lowering failure")

    monkeypatch.setattr(lowering.GraphLowering, "run", broken)
    danlu.reset()
    _run_and_compare(danlu.compile(program))
    assert "injected lowering failure" in _only_graph().error


def test_triton_path_failure(monkeypatch):
    pytest.importorskip("triton", reason="the Triton path needs the 'triton' extra")
    from danlu_inductor.pipeline import triton as triton_path

    def broken(*args, **kwargs):
        raise RuntimeError("injected Triton compile failure")

    monkeypatch.setenv("DANLU_INDUCTOR_TRITON_ON_CPU", "1")  # CPU graphs take the Triton path
    monkeypatch.setattr(triton_path, "compile_triton", broken)
    danlu.reset()
    _run_and_compare(danlu.compile(program))
    assert "injected Triton compile failure" in _only_graph().error


def test_kernel_launch_failure(monkeypatch):
    from danlu_inductor.pipeline import CompiledGraph

    launches = []

    def broken(self, *args):
        launches.append(1)
        raise RuntimeError("injected launch failure: too many resources requested")

    monkeypatch.setattr(CompiledGraph, "__call__", broken)
    danlu.reset()
    _run_and_compare(danlu.compile(program), calls=3)
    assert len(launches) == 1
    assert "injected launch failure" in _only_graph().error


def test_training_graph_failure_at_a_call_falls_back_with_gradients(monkeypatch):
    from danlu_inductor.pipeline import CompiledGraph

    def broken(self, *args):
        raise RuntimeError("injected launch failure")

    monkeypatch.setattr(CompiledGraph, "__call__", broken)
    danlu.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    compiled = danlu.compile(model)
    x = torch.randn(4, 8)
    compiled(x).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)


# ------------------------------------------------------------------ the wrapper on its own


class _Graph:
    def __init__(self, fails=False):
        self.calls = 0
        self.fails = fails

    def __call__(self, *args):
        self.calls += 1
        if self.fails:
            raise ValueError("the program's own error")
        return ("eager", *args)


def test_eager_error_is_the_programs_own_and_nothing_switches():
    def compiled(*args):
        raise RuntimeError("danlu failed")

    graph = _Graph(fails=True)
    wrapped = EagerOnFailure(compiled, graph, None)
    wrapped._eager = graph  # no frame hook to talk to here
    with pytest.raises(ValueError, match="program's own"):
        wrapped(1)
    assert wrapped.reason is None and wrapped.compiled is compiled


def test_program_errors_and_cuda_errors_are_not_retried():
    from danlu_inductor.runtime import ProgramIndexError

    for error in (
        ProgramIndexError("index out of range in a gather/embedding"),
        RuntimeError("CUDA error: an illegal memory access was encountered"),
    ):

        def compiled(*args, _e=error):
            raise _e

        graph = _Graph()
        wrapped = EagerOnFailure(compiled, graph, None)
        wrapped._eager = graph
        with pytest.raises(type(error)):
            wrapped(1)
        assert graph.calls == 0


def test_switch_after_a_failure_that_eager_does_not_share():
    calls = []

    def compiled(*args):
        calls.append(args)
        raise RuntimeError("danlu failed")

    graph = _Graph()
    fallbacks = []
    wrapped = EagerOnFailure(compiled, graph, None, on_fallback=fallbacks.append)
    wrapped._eager = graph
    assert wrapped(1) == ("eager", 1)
    assert wrapped(2) == ("eager", 2)
    assert len(calls) == 1 and graph.calls == 2
    assert fallbacks == ["RuntimeError: danlu failed"]
