"""Dynamic shapes end to end: capture (danlu_dynamo) + danlu_aotautograd's aot_eager, through
`danlu.compile`. Models called with many sequence lengths / batch sizes compile at most twice
(static, then dynamic), match eager every time, and hit the cache afterwards."""

import pathlib
import sys

import pytest
import torch
from models import IMAGE, LANGUAGE, make

import danlu
from danlu.testing import counting_backend, same

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "packages" / "dynamo" / "tests"))
from _dynamic_models import TinyConvNet, TinyTransformer  # noqa: E402


def _symbolic_graph(gm) -> bool:
    return any(
        isinstance(s, torch.SymInt)
        for n in gm.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
        for s in n.meta["val"].shape
    )


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tiny_transformer_training_over_sequence_lengths(backend):
    torch.manual_seed(0)
    ref = TinyTransformer()
    model = TinyTransformer()
    model.load_state_dict(ref.state_dict())
    calls, be = counting_backend(backend)
    compiled = danlu.compile(model, backend=be)
    g = torch.Generator().manual_seed(0)
    lengths = [5, 8, 13, 3, 21, 34, 9, 2, 17, 40, 6]
    for i, t in enumerate(lengths + lengths[::4]):
        b = 2 + i % 3  # batch and length both change from the first call to the second
        x = torch.randint(0, 50, (b, t), generator=g)
        out, exp = compiled(x), ref(x)
        assert same(exp, out)
        out.logsumexp(-1).sum().backward()
        exp.logsumexp(-1).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert same(q.grad, p.grad), f"grad of a {tuple(p.shape)} parameter, t={t}"
            p.grad = q.grad = None
    assert len(calls) == 2
    assert not _symbolic_graph(calls[0]) and _symbolic_graph(calls[1])


def test_tiny_convnet_over_batch_sizes_aot_eager():
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    calls, be = counting_backend("aot_eager")
    compiled = danlu.compile(model, backend=be)
    batches = [2, 3, 5, 8, 4, 13, 6, 21, 7, 10, 16]
    with torch.no_grad():
        for b in batches + batches[::3]:
            x = torch.randn(b, 3, 12, 12)
            assert same(model(x), compiled(x))
    assert len(calls) == 2


@pytest.mark.parametrize("name", list(LANGUAGE))
def test_language_models_over_sequence_lengths(name):
    model, inputs_for = make(name, train=False)
    model.eval()
    calls, be = counting_backend("aot_eager")
    danlu.reset()
    compiled = danlu.compile(model, backend=be)
    lengths = [4, 7, 9, 12, 16, 5, 11, 3, 14, 10]
    with torch.no_grad():
        for t in lengths + lengths[:3]:
            (ids,) = inputs_for(2, t)
            assert same(model(ids), compiled(ids)), f"{name}, seq {t}"
    assert len(calls) == 2, f"{name}: {len(calls)} compiles"


@pytest.mark.parametrize("name", list(IMAGE))
def test_image_models_over_batch_sizes(name):
    model, inputs_for = make(name, train=False)
    model.eval()
    calls, be = counting_backend("aot_eager")
    compiled = danlu.compile(model, backend=be)
    with torch.no_grad():
        for b in [2, 3, 5, 4, 7, 2, 6, 9, 3, 8, 10]:
            (x,) = inputs_for(b, 32)
            assert same(model(x), compiled(x)), f"{name}, batch {b}"
    assert len(calls) == 2, f"{name}: {len(calls)} compiles"


def test_dynamic_true_gives_one_symbolic_graph_to_aotautograd():
    model = TinyTransformer().eval()
    calls, be = counting_backend("aot_eager")
    compiled = danlu.compile(model, backend=be, dynamic=True)
    with torch.no_grad():
        for b, t in [(2, 3), (3, 9), (4, 17), (5, 30)]:
            x = torch.randint(0, 50, (b, t))
            assert same(model(x), compiled(x))
    assert len(calls) == 1 and _symbolic_graph(calls[0])


class _PoolNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.pool = torch.nn.AvgPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x))).mean((2, 3))


def test_avg_pool_convnet_compiles_once_for_all_image_sizes(caplog):
    # the pooling's index clamp (size - 1) is a symbolic fill value: compiled, not eager
    torch.manual_seed(torch.seed() % (1 << 31))
    ref = _PoolNet()
    model = _PoolNet()
    model.load_state_dict(ref.state_dict())
    danlu.reset()
    compiled = danlu.compile(model, dynamic=True)
    with caplog.at_level("WARNING"):
        for s in (16, 20, 9, 31, 24):
            x = torch.randn(2, 3, s, s + 3)
            out, exp = compiled(x), ref(x)
            assert same(exp, out), f"size {s}"
            out.sum().backward()
            exp.sum().backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                assert same(q.grad, p.grad), f"grad, size {s}"
                p.grad = q.grad = None
    assert "cannot compile this graph" not in caplog.text, caplog.text
    assert "recompil" not in caplog.text.lower()
