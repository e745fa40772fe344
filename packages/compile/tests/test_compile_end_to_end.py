"""danlu.compile through each built-in backend against eager, and what it reports."""

import warnings

import pytest
import torch

import danlu
from danlu.testing import same


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.ln(x)))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_module_forward_and_backward_match_eager(backend):
    torch.manual_seed(7)
    model = Block()
    compiled = danlu.compile(Block(), backend=backend)
    compiled.load_state_dict(model.state_dict())
    x = torch.randn(3, 5, 16).transpose(0, 1)  # non-contiguous input
    ref, res = model(x), compiled(x)
    assert same(ref, res)
    ref.square().sum().backward()
    res.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), compiled.parameters()):
        assert same(p.grad, q.grad), name


def test_decorator_forms_and_kernel_report():
    danlu.reset()

    @danlu.compile
    def f(x, y):
        return torch.softmax(x @ y, dim=-1).sum(0)

    @danlu.compile(backend="aot_eager", fullgraph=True)
    def g(x):
        return x.sin() * x.cos()

    x, y = torch.randn(4, 8), torch.randn(8, 6)
    assert same(f(x, y), torch.softmax(x @ y, dim=-1).sum(0))
    assert same(g(x), x.sin() * x.cos())
    stats = danlu.CompileStats.current()
    assert len(stats.graphs) == 2
    assert stats.kernel_graphs and stats.kernel_graphs[0].kernels >= 1
    assert "generated kernels" in stats.summary()


def test_graph_breaks_are_counted_and_fullgraph_names_the_line():
    danlu.reset()

    def f(x):
        y = x * 2
        if y.sum() > 0:  # data-dependent branch: a graph break
            return y + 1
        return y - 1

    compiled = danlu.compile(f, backend="eager")
    for _ in range(2):
        x = torch.randn(5)
        assert same(compiled(x), f(x))
    assert danlu.CompileStats.current().graph_breaks >= 1
    strict = danlu.compile(f, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match=r"test_compile_end_to_end.py:\d+"):
        strict(torch.randn(5))


def test_torch_container_modules_are_captured_not_run_eagerly():
    torch.manual_seed(0)
    danlu.reset()
    model = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 8), torch.nn.Tanh())
    compiled = danlu.compile(model)
    x = torch.randn(4, 16)
    assert same(model(x), compiled(x))
    graphs = danlu.CompileStats.current().graphs
    assert len(graphs) == 1 and graphs[0].ops == 3
    model[1].weight.data.mul_(2)  # parameters are read on every call, not baked in
    assert same(model(x), compiled(x))
    assert len(danlu.CompileStats.current().graphs) == 1


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_trains_like_eager(mode):
    # its library kernel's auxiliary outputs differ from the meta kernel's: those graphs
    # run eagerly (with a warning), and the result must still be eager's
    torch.manual_seed(torch.seed() % 2**31)
    model = torch.nn.EmbeddingBag(10, 4, mode=mode)
    ref = torch.nn.EmbeddingBag(10, 4, mode=mode)
    ref.load_state_dict(model.state_dict())
    compiled = danlu.compile(model)
    for _ in range(2):
        x = torch.randint(0, 10, (3, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = compiled(x)
        exp = ref(x)
        torch.testing.assert_close(out, exp)
        out.square().sum().backward()
        exp.square().sum().backward()
        torch.testing.assert_close(model.weight.grad, ref.weight.grad)


def test_negative_and_conjugate_views_are_not_served_a_plain_tensors_graph():
    # the same sizes, strides and dtype as the tensor the graph was compiled for, but the
    # sign (conjugation) is pending in a dispatch key: the plain graph would read the storage
    def g(x):
        return x.sin() * 2

    danlu.reset()
    compiled = danlu.compile(g)
    x = torch.randn(6)
    assert same(compiled(x), g(x))
    nx = torch._neg_view(x)
    assert same(compiled(nx), g(nx))
    z = torch.randn(6, dtype=torch.cfloat)
    assert same(compiled(z), g(z))
    assert same(compiled(z.conj()), g(z.conj()))
