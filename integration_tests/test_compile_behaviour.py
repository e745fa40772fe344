"""How `danlu.compile` behaves across calls: caching, recompiles, graph breaks, interop."""

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
    assert len(seen) == 6  # the side effect ran once per call, eager and compiled alike
    assert _graphs() >= 2


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
