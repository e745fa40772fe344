"""A small transformer and a small convnet over 10+ sequence lengths / batch sizes: at most two
compiles (static, then dynamic), right for every size, cache hits afterwards."""

import pytest
import torch
from _dynamic_models import TinyConvNet, TinyTransformer

import danlu_dynamo
from danlu_dynamo import config, eval_frame


class Counter:
    def __init__(self):
        self.n = 0
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.n += 1
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture(params=["bytecode", "segments"])
def capture_path(request, monkeypatch):
    monkeypatch.setattr(config, "capture_path", request.param)
    return request.param


def _check(opt, model, inputs, be, *, max_compiles=2):
    for x in inputs:
        with torch.no_grad():
            torch.testing.assert_close(opt(x), model(x), rtol=1e-5, atol=1e-5)
    assert be.n <= max_compiles
    n = be.n
    hits = eval_frame.stats()["hits"]
    for x in inputs[::3]:  # sizes seen before: no new compile
        with torch.no_grad():
            torch.testing.assert_close(opt(x), model(x), rtol=1e-5, atol=1e-5)
    assert be.n == n
    if config.capture_path == "bytecode":
        assert eval_frame.stats()["hits"] > hits


def test_transformer_over_sequence_lengths(capture_path):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    be = Counter()
    opt = danlu_dynamo.optimize(be)(model)
    g = torch.Generator().manual_seed(1)
    inputs = [
        torch.randint(0, 50, (2, t), generator=g) for t in (5, 9, 12, 3, 17, 31, 8, 2, 40, 23, 6)
    ]
    _check(opt, model, inputs, be)
    assert be.n == 2
    sym = [n for n in be.graphs[1].graph.nodes if n.op == "call_method" and n.target == "size"]
    assert sym, "the dynamic graph computes the sequence length"


def test_transformer_over_batch_and_sequence(capture_path):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    be = Counter()
    opt = danlu_dynamo.optimize(be)(model)
    g = torch.Generator().manual_seed(2)
    sizes = [(2, 4), (3, 7), (5, 5), (4, 11), (2, 19), (6, 3), (3, 33), (7, 8), (2, 2), (9, 14)]
    inputs = [torch.randint(0, 50, s, generator=g) for s in sizes]
    _check(opt, model, inputs, be)


def test_transformer_dynamic_true_compiles_once():
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=True)(model)
    g = torch.Generator().manual_seed(3)
    inputs = [torch.randint(0, 50, (b, t), generator=g) for b, t in [(2, 6), (3, 9), (4, 13)] * 4]
    _check(opt, model, inputs, be, max_compiles=1)


def test_convnet_over_batch_sizes(capture_path):
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    be = Counter()
    opt = danlu_dynamo.optimize(be)(model)
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(b, 3, 12, 12, generator=g) for b in (2, 3, 5, 8, 4, 13, 6, 21, 7, 10, 16)]
    _check(opt, model, inputs, be)
    assert be.n == 2


def test_convnet_over_image_sizes():
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    be = Counter()
    opt = danlu_dynamo.optimize(be)(model)
    g = torch.Generator().manual_seed(5)
    sizes = [(2, 8, 8), (3, 10, 12), (4, 9, 7), (2, 16, 16), (5, 6, 11), (3, 13, 9)]
    sizes += [(6, 20, 14), (2, 7, 7), (4, 12, 18), (3, 15, 15)]
    inputs = [torch.randn(b, 3, h, w, generator=g) for b, h, w in sizes]
    _check(opt, model, inputs, be)


def test_convnet_training_step_over_batch_sizes():
    # the backward runs eagerly through autograd on the captured graph's ops
    torch.manual_seed(0)
    model = TinyConvNet()
    ref = TinyConvNet()
    ref.load_state_dict(model.state_dict())
    be = Counter()
    opt = danlu_dynamo.optimize(be)(model)
    g = torch.Generator().manual_seed(6)
    for b in (2, 3, 5, 4, 9, 6, 11, 7, 2, 8):
        x = torch.randn(b, 3, 10, 10, generator=g)
        out, exp = opt(x), ref(x)
        torch.testing.assert_close(out, exp, rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        exp.square().sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None
    assert be.n <= 2
