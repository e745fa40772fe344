"""The accuracy bisect finds the node where a (deliberately) wrong compiler first disagrees."""

import pytest
import torch

import danlu
import danlu.accuracy as acc


def _model():
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8), torch.nn.Tanh()
    )


def _wrong_at(target):
    """A compiler that runs the graph eagerly but adds 1 to every result of `target`."""

    def compiler(gm, inputs):
        def run(*args):
            env = {}
            for n in gm.graph.nodes:
                if n.op == "placeholder":
                    env[n] = args[len(env)]
                elif n.op == "output":
                    return torch.fx.node.map_arg(n.args[0], lambda a: env[a])
                else:
                    a = torch.fx.node.map_arg(n.args, lambda x: env[x])
                    k = torch.fx.node.map_arg(n.kwargs, lambda x: env[x])
                    env[n] = n.target(*a, **k)
                    if n.target is target:
                        env[n] = env[n] + 1

        return run

    return compiler


def test_record_graphs_and_bisect_finds_the_wrong_op():
    torch.manual_seed(torch.seed() % 1000)
    model = _model().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        graphs = acc.record_graphs(model, (x,))
    assert [g.kind for g in graphs] == ["inference"]
    gm, inputs = graphs[0].gm, graphs[0].inputs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    tanh = next(t for t in targets if "tanh" in str(t))
    report = acc.find_divergence(gm, inputs, _wrong_at(tanh))
    assert report.node is not None and "tanh" in report.node, report
    assert report.whole_graph_error > 0.05
    danlu.reset()


def test_bisect_with_inductor_finds_nothing_on_a_correct_compile():
    model = _model().eval()
    with torch.no_grad():
        graphs = acc.record_graphs(model, (torch.randn(16, 5).t(),))
    report = acc.find_divergence(graphs[0].gm, graphs[0].inputs)
    assert report.node is None and report.whole_graph_error < 1e-4, report
    danlu.reset()


@pytest.mark.parametrize(
    "a, b, bad",
    [
        (torch.ones(3), torch.ones(3), False),
        (torch.ones(3), torch.ones(4), True),
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")]), True),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), True),
    ],
)
def test_relative_error(a, b, bad):
    err = acc.relative_error(a, b)
    assert (err == float("inf")) == bad
