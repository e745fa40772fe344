"""`danlu.compile` on torch's own transformer layers: one graph, no break, in train and eval
(with and without `no_grad`); outputs and gradients equal eager's. Their fast-path checks
read submodule parameters met first through `self.modules()` (was: "tensor without a
source", 0 graphs, the whole layer eager)."""

import copy

import pytest
import torch
from torch import nn

import danlu


def _layers(dropout=0.1):
    torch.manual_seed(0)
    kw = dict(batch_first=True, dropout=dropout)
    return {
        "encoder_layer": nn.TransformerEncoderLayer(64, 4, 128, **kw),
        "decoder_layer": nn.TransformerDecoderLayer(64, 4, 128, **kw),
        "mha": nn.MultiheadAttention(64, 4, **kw),
        "encoder": nn.TransformerEncoder(
            nn.TransformerEncoderLayer(64, 4, 128, **kw), 2, enable_nested_tensor=False
        ),
    }


def _run(kind, m, x, mem):
    if kind == "decoder_layer":
        return m(x, mem)
    if kind == "mha":
        return m(x, mem, mem)[0]
    return m(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind", ["encoder_layer", "decoder_layer", "mha", "encoder"])
def test_train_and_eval_one_graph_each(kind, backend):
    # dropout draws its masks in another order when aotautograd traces the step: compared
    # without dropout there, with torch's default dropout through the eager backend
    ref = _layers(0.1 if backend == "eager" else 0.0)[kind]
    m = copy.deepcopy(ref)
    x, mem = torch.randn(2, 5, 64), torch.randn(2, 6, 64)
    for mode in ("train", "eval", "eval_no_grad"):
        danlu.reset()
        ref.train(mode == "train")
        m.train(mode == "train")
        compiled = danlu.compile(m, backend=backend)
        with torch.set_grad_enabled(mode != "eval_no_grad"):
            torch.manual_seed(3)
            e = _run(kind, ref, x, mem)
            torch.manual_seed(3)
            c = _run(kind, compiled, x, mem)
        assert torch.allclose(e, c, atol=1e-5), mode
        stats = danlu.CompileStats.current()
        assert len(stats.graphs) == 1 and stats.graph_breaks == 0, (mode, stats.summary())
        if mode == "train":
            e.sum().backward()
            c.sum().backward()
            for (n, p), q in zip(ref.named_parameters(), m.parameters()):
                assert torch.allclose(p.grad, q.grad, atol=1e-5), n
            ref.zero_grad()
            m.zero_grad()


def test_inductor_encoder_layer_eval():
    danlu.reset()
    m = _layers()["encoder_layer"].eval()
    x = torch.randn(2, 5, 64)
    compiled = danlu.compile(m, backend="inductor")
    with torch.no_grad():
        assert torch.allclose(m(x), compiled(x), atol=1e-4)
    assert len(danlu.CompileStats.current().graphs) == 1
