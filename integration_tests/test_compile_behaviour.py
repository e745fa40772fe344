"""How `danlu.compile` behaves across calls: caching, recompiles, graph breaks, interop."""

import pytest
import torch

import danlu
from danlu.testing import same


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x))).softmax(-1)


def _graphs():
    return len(danlu.CompileStats.current().graphs)


def test_calling_twice_compiles_once_and_new_shape_recompiles_once():
    danlu.reset()
    model = MLP().eval()
    compiled = danlu.compile(model)
    x = torch.randn(4, 16)
    with torch.no_grad():
        assert same(model(x), compiled(x))
        first = _graphs()
        assert first >= 1
        compiled(torch.randn(4, 16))
        assert _graphs() == first  # same shape: cached
        y = torch.randn(7, 16)
        assert same(model(y), compiled(y))
        second = _graphs()
        assert second == first + 1  # new shape: one recompile
        compiled(torch.randn(7, 16))
        compiled(torch.randn(4, 16))
        assert _graphs() == second  # both shapes cached now


def test_graph_break_in_the_middle_of_a_model_stays_correct():
    seen = []

    class Breaking(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            h = torch.relu(self.a(x))
            seen.append(float(h.sum()))  # .item()-like data-dependent work: a graph break
            if h.sum() > 0:  # data-dependent branch
                h = h * 2
            return self.b(h).tanh()

    torch.manual_seed(3)
    model = Breaking()
    danlu.reset()
    compiled = danlu.compile(model)
    for _ in range(3):
        x = torch.randn(5, 8)
        ref = model(x)
        res = compiled(x)
        assert same(ref, res), (ref - res).abs().max()
        # gradients flow back through both compiled graphs and the eager code between them
        ref.square().sum().backward()
        ref_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        res.square().sum().backward()
        assert same(ref_grads, [p.grad for p in model.parameters()])
        model.zero_grad()
    assert len(seen) == 6  # the side effect ran once per call, eager and compiled alike
    assert _graphs() >= 2
    assert danlu.CompileStats.current().graph_breaks >= 1


def test_danlu_capture_feeds_another_backend():
    calls = []

    def counting_backend(gm, example_inputs):
        calls.append(len(list(gm.graph.nodes)))
        return gm.forward

    model = MLP()
    danlu.reset()
    compiled = danlu.compile(model, backend=counting_backend)
    x = torch.randn(3, 16)
    assert same(model(x), compiled(x))
    assert calls and calls[0] > 3


def test_danlu_capture_feeds_torch_aot_eager_forward_and_backward():
    from torch._dynamo.backends.registry import lookup_backend as torch_backend

    torch.manual_seed(1)
    model = MLP()
    x = torch.randn(6, 16)
    ref = model(x)
    ref.sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    danlu.reset()
    compiled = danlu.compile(model, backend=torch_backend("aot_eager"))
    res = compiled(x)
    res.sum().backward()
    assert same(ref, res)
    assert same(ref_grads, [p.grad for p in model.parameters()])
    assert _graphs() == 1


def test_danlu_inductor_backend_inside_torch_compile_trains():
    """The umbrella's "inductor" backend (aotautograd + danlu-inductor) under torch's capture."""
    torch.manual_seed(2)
    model = MLP()
    x = torch.randn(6, 16)
    ref = model(x)
    ref.sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    danlu.reset()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=danlu.lookup_backend("inductor"))
    res = compiled(x)
    res.sum().backward()
    torch._dynamo.reset()
    assert same(ref, res)
    assert same(ref_grads, [p.grad for p in model.parameters()])
    stats = danlu.CompileStats.current()
    assert len(stats.kernel_graphs) == 2  # forward and backward went through danlu-inductor
    assert stats.phases["autograd"] > 0 and stats.phases["lowering"] > 0


def test_gpt2_new_sequence_length_recompiles_once_then_is_cached():
    from models import make

    model, inputs_for = make("gpt2", train=False)
    model.eval()
    danlu.reset()
    compiled = danlu.compile(model)
    with torch.no_grad():
        for _ in range(2):
            (ids,) = inputs_for(2, 16)
            assert same(model(ids), compiled(ids))
        first = _graphs()
        assert first >= 1
        for _ in range(2):
            (ids,) = inputs_for(2, 24)
            assert same(model(ids), compiled(ids))
        assert _graphs() == 2 * first  # every graph compiled once more for the new length
        for t in (16, 24):
            (ids,) = inputs_for(2, t)
            assert same(model(ids), compiled(ids))
        assert _graphs() == 2 * first


def test_danlu_backends_inside_torch_compile():
    import danlu_aotautograd
    import danlu_inductor

    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(6, 16, requires_grad=True)
    ref = model(x)
    ref.sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=danlu_aotautograd.aot_eager)
    res = compiled(x.detach().requires_grad_())
    res.sum().backward()
    assert same(ref, res)
    assert same(ref_grads, [p.grad for p in model.parameters()])
    with torch.no_grad():
        torch._dynamo.reset()
        inf = torch.compile(model, backend=danlu_inductor.inference_backend)
        assert same(model(x), inf(x))
    torch._dynamo.reset()


@pytest.mark.parametrize("name", ["danlu", "danlu_aot_eager"])
def test_torch_compile_finds_danlu_by_name_and_trains(name):
    """`pip install danlu` registers its backends in torch's `torch_dynamo_backends` entry-point
    group: `torch.compile(backend="danlu")` needs no import of danlu."""
    import subprocess
    import sys

    script = f"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
ref = __import__("copy").deepcopy(model)
compiled = torch.compile(model, backend={name!r})
opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
for step in range(3):
    x = torch.randn(8, 16)
    for m, o in ((compiled, opt), (ref, opt_ref)):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()
for p, q in zip(model.parameters(), ref.parameters()):
    torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
import sys, danlu
stats = danlu.CompileStats.current()
assert "danlu" in sys.modules and len(stats.graphs) >= 1, stats.summary()
print("ok", len(stats.graphs), len(stats.kernel_graphs))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    graphs, kernel_graphs = map(int, proc.stdout.split()[1:3])
    assert graphs >= 1
    assert kernel_graphs == (2 if name == "danlu" else 0)  # forward and backward kernels
