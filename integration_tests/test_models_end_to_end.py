"""Real models through `danlu.compile`: inference and a training step with an optimizer,
against eager by the PT2 accuracy rule (float64 reference)."""

import copy

import pytest
import torch
from models import IMAGE, LANGUAGE, make

import danlu
from danlu.testing import same

MODELS = [*LANGUAGE, *IMAGE]


def _fp64(module, inputs):
    m64 = copy.deepcopy(module).double()
    inputs64 = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    return m64, inputs64


@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_eager(name):
    model, inputs_for = make(name, train=False)
    model.eval()
    inputs = inputs_for()
    danlu.reset()
    compiled = danlu.compile(copy.deepcopy(model))
    with torch.no_grad():
        ref = model(*inputs)
        m64, in64 = _fp64(model, inputs)
        ref64 = m64(*in64)
        res = compiled(*inputs)
        res_again = compiled(*inputs)
    assert same(ref, res, ref64), f"{name}: max abs diff {(ref - res).abs().max().item():.3g}"
    assert same(ref, res_again, ref64)
    _assert_compiled(name)


def _assert_compiled(name):
    """Guard against a pass that only means 'everything fell back to eager'."""
    graphs = danlu.CompileStats.current().graphs
    assert graphs, f"{name}: nothing reached the backend"
    assert sum(g.ops for g in graphs) >= 10, f"{name}: only {[g.ops for g in graphs]} ops compiled"


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_eager(name):
    model, inputs_for = make(name, train=True)
    model.train()
    if name in IMAGE:  # image models return logits: train them on a cross-entropy loss
        head = model

        class WithLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = head

            def forward(self, x):
                return torch.nn.functional.cross_entropy(
                    self.inner(x), torch.arange(x.shape[0]) % 10
                )

        model = WithLoss()
    inputs = inputs_for()
    eager_model, compiled_model = model, copy.deepcopy(model)
    danlu.reset()
    compiled = danlu.compile(compiled_model)
    results = []
    for m, fn in ((eager_model, eager_model), (compiled_model, compiled)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        torch.manual_seed(1234)  # same RNG state: dropout must draw the same masks as eager
        losses = []
        for _ in range(2):
            loss = fn(*inputs)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
        results.append((losses, [p.detach().clone() for p in m.parameters()]))
    (ref_losses, ref_params), (res_losses, res_params) = results
    _assert_compiled(name)
    assert same(ref_losses, res_losses, rtol=1e-3, atol=1e-4), (ref_losses, res_losses)
    assert same(ref_params, res_params, rtol=1e-3, atol=1e-4), name
