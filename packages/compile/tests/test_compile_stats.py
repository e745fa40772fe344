"""Per-phase compile times: recorded per graph, summed, printed, and logged on `perf`."""

import logging

import torch

import danlu
from danlu.stats import PHASES
from danlu.testing import same


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.Tanh())


def test_inductor_training_records_every_phase():
    danlu.reset()
    model = _model()
    compiled = danlu.compile(_model())
    compiled.load_state_dict(model.state_dict())
    x = torch.randn(4, 16)
    ref, res = model(x), compiled(x)
    assert same(ref, res)
    res.sum().backward()
    stats = danlu.CompileStats.current()
    phases = stats.phases
    assert list(phases) == [p for p in PHASES if p in phases]  # pipeline order
    for phase in ("capture", "autograd", "lowering", "codegen", "backend compile"):
        assert phase in phases and phases[phase] > 0, (phase, phases)
    (graph,) = stats.graphs
    # the phases inside the backend add up to the backend's own wall time
    inside = sum(v for k, v in graph.phases.items() if k != "capture")
    assert abs(inside - graph.backend_s) < 1e-6
    # forward + backward: the graph record counts the kernels of both ATen graphs
    assert graph.kernels == sum(k.kernels for k in stats.kernel_graphs) >= 2
    summary = stats.summary()
    assert "compile time:" in summary
    for phase in ("capture", "autograd", "lowering", "codegen", "backend compile"):
        assert f"{phase}: " in summary


def test_a_foreign_backend_counts_as_backend_compile():
    danlu.reset()

    def slow_backend(gm, example_inputs):
        import time

        time.sleep(0.05)
        return gm.forward

    f = danlu.compile(lambda x: x.cos() * 2, backend=slow_backend)
    x = torch.randn(3)
    assert same(f(x), x.cos() * 2)
    phases = danlu.CompileStats.current().phases
    assert phases["backend compile"] >= 0.05
    assert "autograd" not in phases and "lowering" not in phases


def test_perf_topic_logs_each_graph_with_its_phases(caplog):
    danlu.reset()
    try:
        danlu.config.logs = "perf"
        logging.getLogger("danlu.perf").addHandler(caplog.handler)
        f = danlu.compile(lambda x: torch.softmax(x, -1) * 3)
        x = torch.randn(2, 5)
        assert same(f(x), torch.softmax(x, -1) * 3)
        f(x)
    finally:
        logging.getLogger("danlu.perf").removeHandler(caplog.handler)
        danlu.config.logs = ""
    lines = [r.getMessage() for r in caplog.records if r.name == "danlu.perf"]
    assert len(lines) == 1, lines  # one line per compiled graph, not per call
    assert "graph 0" in lines[0] and "capture" in lines[0] and "backend compile" in lines[0]


def test_reset_clears_phases():
    danlu.reset()
    f = danlu.compile(lambda x: x + 1, backend="eager")
    f(torch.randn(2))
    assert danlu.CompileStats.current().phases
    danlu.reset()
    assert danlu.CompileStats.current().phases == {}
    assert danlu.CompileStats.current().summary().startswith("captured graphs: 0")


def test_first_runs_of_compiled_graphs_are_summed_apart_from_the_phases():
    from danlu.stats import CompileStats

    class Compiled:
        def __init__(self, report):
            self.report = report

    stats = CompileStats()
    ran, pending = Compiled({"kernels": 3, "first_run_s": 1.25}), Compiled({"kernels": 2})
    stats.record_kernels(ran, "forward graph of graph 0")
    stats.record_kernels(pending, "backward graph of graph 0")
    assert stats.first_run_seconds() == 1.25
    pending.report["first_run_s"] = 0.5  # the backward's first call, later
    assert stats.first_run_seconds() == 1.75
    assert "first runs of the compiled graphs (kernel loads, autotuning): 1.75 s" in stats.summary()
    assert CompileStats().first_run_seconds() is None
