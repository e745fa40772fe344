"""torch's own transformer layers compiled whole: their fast-path checks read parameters of
submodules met first through ``self.modules()``; those keep their attribute path, so the
parameters are graph inputs (before: "tensor without a source", no graph, the layer ran
eagerly). Outputs and gradients equal eager's in train and eval, with and without masks."""

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import danlu_dynamo

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import Counter  # noqa: E402

D, H, F = 32, 4, 64


def _inputs(seed, masks):
    g = torch.Generator().manual_seed(seed)
    src = torch.randn(2, 5, D, generator=g)
    tgt = torch.randn(2, 4, D, generator=g)
    kw = {}
    if masks:
        pad = torch.zeros(2, 5, dtype=torch.bool)
        pad[1, -2:] = True
        kw = {"src_mask": nn.Transformer.generate_square_subsequent_mask(5), "pad": pad}
    return src, tgt, kw


def _encoder_layer():
    return nn.TransformerEncoderLayer(D, H, F, batch_first=True, dropout=0.0)


def _decoder_layer():
    return nn.TransformerDecoderLayer(D, H, F, batch_first=True, dropout=0.0)


def _call(kind, m, src, tgt, kw):
    if kind == "encoder":
        if kw:
            # is_causal=True: otherwise the encoder compares the mask with a causal one by
            # value (data-dependent; see test_encoder_mask_compared_by_value_breaks_cleanly)
            return m(src, mask=kw["src_mask"], src_key_padding_mask=kw["pad"], is_causal=True)
        return m(src)
    if kind == "encoder_layer":
        if kw:
            return m(src, src_mask=kw["src_mask"], src_key_padding_mask=kw["pad"])
        return m(src)
    if kind == "decoder_layer":
        if kw:
            tmask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            return m(tgt, src, tgt_mask=tmask, memory_key_padding_mask=kw["pad"])
        return m(tgt, src)
    if kind == "mha":
        if kw:
            out, w = m(src, src, src, key_padding_mask=kw["pad"], attn_mask=kw["src_mask"])
        else:
            out, w = m(src, src, src)
        return out + (w.sum() if w is not None else 0)
    raise AssertionError(kind)


def _make(kind):
    torch.manual_seed(0)
    if kind == "encoder_layer":
        return _encoder_layer()
    if kind == "encoder":
        return nn.TransformerEncoder(_encoder_layer(), num_layers=2, enable_nested_tensor=False)
    if kind == "decoder_layer":
        return _decoder_layer()
    if kind == "mha":
        return nn.MultiheadAttention(D, H, batch_first=True)
    raise AssertionError(kind)


def _compiled(m, backend):
    """A function calling the module (how ``danlu.compile`` enters torch's own modules)."""

    def call_module(*args, **kwargs):
        return m(*args, **kwargs)

    opt = danlu_dynamo.optimize(backend)(call_module)
    return opt


KINDS = ["encoder_layer", "encoder", "decoder_layer", "mha"]


@pytest.mark.parametrize("masks", [False, True], ids=["nomask", "masks"])
@pytest.mark.parametrize("kind", KINDS)
def test_train_step_matches_eager_one_graph(kind, masks):
    ref = _make(kind).train()
    m = copy.deepcopy(ref)
    counter = Counter()
    opt = _compiled(m, counter)
    for seed in (1, 2):
        src, tgt, kw = _inputs(seed, masks)
        e = _call(kind, ref, src, tgt, kw)
        c = _call(kind, opt, src, tgt, kw)
        assert torch.allclose(e, c, atol=1e-5, equal_nan=True)
        e.nan_to_num().square().sum().backward()
        c.nan_to_num().square().sum().backward()
        for (n, p), q in zip(ref.named_parameters(), m.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-5), n
    assert len(counter.graphs) == 1, len(counter.graphs)
    assert not opt._capture_ctx.breaks, [str(b) for b in opt._capture_ctx.breaks]


@pytest.mark.parametrize("no_grad", [False, True], ids=["grad", "no_grad"])
@pytest.mark.parametrize("masks", [False, True], ids=["nomask", "masks"])
@pytest.mark.parametrize("kind", KINDS)
def test_eval_matches_eager_and_is_captured(kind, masks, no_grad):
    m = _make(kind).eval()
    counter = Counter()
    opt = _compiled(m, counter)
    for seed in (1, 2):
        src, tgt, kw = _inputs(seed, masks)
        with torch.set_grad_enabled(not no_grad):
            e = _call(kind, m, src, tgt, kw)
            c = _call(kind, opt, src, tgt, kw)
        assert torch.allclose(e, c, atol=1e-5, equal_nan=True)
    assert len(counter.graphs) >= 1
    reasons = [str(b) for b in opt._capture_ctx.breaks]
    assert not any("without a source" in r for r in reasons), reasons


def test_encoder_mask_compared_by_value_breaks_cleanly():
    m = _make("encoder").eval()
    counter = Counter()
    opt = _compiled(m, counter)
    for seed in (1, 2):
        src, _, kw = _inputs(seed, True)
        args = dict(mask=kw["src_mask"], src_key_padding_mask=kw["pad"])
        assert torch.allclose(m(src, **args), opt(src, **args), atol=1e-5, equal_nan=True)
    reasons = [str(b) for b in opt._capture_ctx.breaks]
    assert reasons and all("_detect_is_causal_mask" in r for r in reasons), reasons


class UserBlock(nn.Module):
    """User code around torch layers: the layer is inlined into the user's graph."""

    def __init__(self):
        super().__init__()
        self.enc = _encoder_layer()
        self.mha = nn.MultiheadAttention(D, H, batch_first=True)
        self.proj = nn.Linear(D, D)

    def forward(self, x, pad=None):
        y = self.enc(x, src_key_padding_mask=pad)
        z, _ = self.mha(y, y, y, need_weights=False)
        return self.proj(z + y)


@pytest.mark.parametrize("train", [True, False])
def test_user_module_around_torch_layers(train):
    ref = UserBlock().train(train)
    m = copy.deepcopy(ref)
    counter = Counter()
    opt = danlu_dynamo.optimize(counter)(m)
    for seed in (1, 2):
        src, _, kw = _inputs(seed, True)
        e, c = ref(src, kw["pad"]), opt(src, kw["pad"])
        assert torch.allclose(e, c, atol=1e-5, equal_nan=True)
        if train:
            e.nan_to_num().sum().backward()
            c.nan_to_num().sum().backward()
            for (n, p), q in zip(ref.named_parameters(), m.parameters()):
                assert torch.allclose(p.grad, q.grad, atol=1e-5), n
    assert len(counter.graphs) == 1 and not opt._capture_ctx.breaks


class Scanning(nn.Module):
    """User code that meets its submodules through ``children()``/``modules()`` first."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(D, D)
        self.b = nn.Sequential(nn.Linear(D, D), nn.GELU())

    def forward(self, x):
        n_linear = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        first = next(iter(self.children()))
        w = first.weight  # the same module as self.a: its weight is a graph input
        return self.b(x @ w.t() + self.a.bias) * n_linear


def test_submodules_met_through_iteration_then_read_as_attributes():
    ref = Scanning()
    m = copy.deepcopy(ref)
    counter = Counter()
    opt = danlu_dynamo.optimize(counter)(m)
    for seed in (1, 2):
        x = torch.randn(3, D, generator=torch.Generator().manual_seed(seed))
        e, c = ref(x), opt(x)
        assert torch.allclose(e, c, atol=1e-6)
        e.sum().backward()
        c.sum().backward()
    for (n, p), q in zip(ref.named_parameters(), m.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), n
    assert len(counter.graphs) == 1 and not opt._capture_ctx.breaks
