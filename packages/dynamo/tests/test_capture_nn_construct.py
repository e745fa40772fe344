"""torch.nn modules constructed inside traced code: state-free ones are captured whole (built
at trace time, forward inlined); anything with state, a non-torch class, non-constant
arguments or writes still breaks, and results always match eager."""

import pytest
import torch
from torch import nn
from torch.nn import CrossEntropyLoss

import danlu_dynamo


def _explain(fn, *args):
    return danlu_dynamo.explain(fn)(*args)


class LossInForward(nn.Module):
    """The transformers pattern: the loss module is made on every forward."""

    def __init__(self, d, vocab):
        super().__init__()
        self.proj = nn.Linear(d, vocab)
        self.vocab = vocab

    def forward(self, x, labels):
        logits = self.proj(x)
        loss_fct = CrossEntropyLoss(ignore_index=-100)
        return loss_fct(logits.view(-1, self.vocab), labels.view(-1))


@pytest.mark.parametrize("seed,shape", [(0, (2, 5)), (1, (3, 7)), (2, (1, 4))])
def test_cross_entropy_built_in_forward_loss_and_grads(seed, shape):
    torch.manual_seed(seed)
    b, s = shape
    vocab, d = 11, 6
    ref_m = LossInForward(d, vocab)
    opt_m = LossInForward(d, vocab)
    opt_m.load_state_dict(ref_m.state_dict())
    x = torch.randn(s, b, d).transpose(0, 1)  # non-contiguous
    labels = torch.randint(0, vocab, (b, s))
    labels[0, 0] = -100  # ignored position
    xr, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref = ref_m(xr, labels)
    ref.backward()
    compiled = danlu_dynamo.optimize("eager")(opt_m)
    got = compiled(xo, labels)
    got.backward()
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(xo.grad, xr.grad)
    for (n, p), (_, q) in zip(ref_m.named_parameters(), opt_m.named_parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=n)
    e = _explain(opt_m, x, labels)
    assert e.graph_count == 1 and e.graph_break_count == 0, e.break_reasons
    assert not e.eager_regions


def _loss_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(4, 6, generator=g)
    b = torch.randn(6, 4, generator=g).t()  # non-contiguous
    return a, b


STATELESS = [
    ("mse", lambda a, b: nn.MSELoss()(a, b)),
    ("mse_sum", lambda a, b: nn.MSELoss(reduction="sum")(a, b)),
    ("l1", lambda a, b: nn.L1Loss()(a, b)),
    ("smooth_l1", lambda a, b: nn.SmoothL1Loss(beta=0.5)(a, b)),
    ("bce_logits", lambda a, b: nn.BCEWithLogitsLoss()(a, b.sigmoid())),
    ("nll", lambda a, b: nn.NLLLoss()(a.log_softmax(-1), b.argmax(-1))),
    ("ce_smooth", lambda a, b: nn.CrossEntropyLoss(label_smoothing=0.1)(a, b.softmax(-1))),
    ("relu", lambda a, b: nn.ReLU()(a) + b),
    ("gelu_tanh", lambda a, b: nn.GELU(approximate="tanh")(a) * b),
    ("silu", lambda a, b: nn.SiLU()(a - b)),
    ("tanh", lambda a, b: nn.Tanh()(a)),
    ("softmax", lambda a, b: nn.Softmax(dim=-1)(a + b)),
    ("log_softmax", lambda a, b: nn.LogSoftmax(0)(a)),
    ("dropout_p0", lambda a, b: nn.Dropout(p=0.0)(a) + b),
    ("identity", lambda a, b: nn.Identity(54, unused="x")(a) - b),
    ("flatten", lambda a, b: nn.Flatten(0)(a * b)),
    ("unflatten", lambda a, b: nn.Unflatten(1, (2, 3))(a)),
    ("leaky", lambda a, b: nn.LeakyReLU(0.3)(a)),
]


@pytest.mark.parametrize("name,fn", STATELESS, ids=[n for n, _ in STATELESS])
def test_stateless_modules_capture_whole(name, fn):
    for seed in (0, 1):
        a, b = _loss_inputs(seed)
        ar, ao = a.clone().requires_grad_(), a.clone().requires_grad_()
        ref = fn(ar, b)
        got = danlu_dynamo.optimize("eager")(fn)(ao, b)
        torch.testing.assert_close(got, ref)
        ref.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(ao.grad, ar.grad)
    e = _explain(fn, a, b)
    assert e.graph_break_count == 0 and not e.eager_regions, e.break_reasons
    assert e.graph_count == 1


def test_dropout_built_in_trace_is_training_mode():
    # A fresh module is in training mode, whatever the caller's mode: p=0.5 drops elements.
    def f(x):
        return nn.Dropout(p=0.5)(x)

    x = torch.rand(2000) + 1.0
    got = danlu_dynamo.optimize("eager")(f)(x)
    kept = got != 0
    assert 0.3 < kept.float().mean().item() < 0.7
    torch.testing.assert_close(got[kept], x[kept] * 2)
    e = _explain(f, x)
    assert e.graph_break_count == 0


def _breaks(fn, *args):
    e = _explain(fn, *args)
    return e.graph_break_count + len(e.eager_regions), e.break_reasons + e.eager_regions


def test_module_with_parameters_built_in_trace_breaks_and_matches():
    def f(x):
        lin = nn.Linear(4, 3)  # fresh random weights on every call
        return lin(x).relu()

    x = torch.randn(5, 4)
    opt = danlu_dynamo.optimize("eager")(f)
    for seed in (3, 4):
        torch.manual_seed(seed)
        ref = f(x)
        torch.manual_seed(seed)
        got = opt(x)
        torch.testing.assert_close(got, ref)
    n, reasons = _breaks(f, x)
    assert n >= 1
    assert any("Linear" in str(getattr(r, "reason", r)) for r in reasons)


def test_module_with_buffers_breaks():
    def f(x):
        bn = nn.BatchNorm1d(4)  # running statistics: buffers
        return bn(x)

    x = torch.randn(6, 4)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), f(x))
    assert _breaks(f, x)[0] >= 1


def test_state_free_batchnorm_without_stats_captures():
    def f(x):
        return nn.BatchNorm1d(4, affine=False, track_running_stats=False)(x)

    x = torch.randn(6, 4)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), f(x))
    assert _breaks(f, x)[0] == 0


def test_tensor_constructor_argument_breaks():
    w = torch.rand(5) + 0.5

    def f(x, y):
        return nn.CrossEntropyLoss(weight=w)(x, y)

    x, y = torch.randn(3, 5), torch.tensor([0, 4, 2])
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x, y), f(x, y))
    assert _breaks(f, x, y)[0] >= 1


class MyLoss(nn.MSELoss):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, a, b):
        return super().forward(a, b) * self.scale


def test_user_subclass_of_torch_loss_breaks():
    def f(a, b):
        return MyLoss()(a, b)

    a, b = _loss_inputs(5)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(a, b), f(a, b))
    assert _breaks(f, a, b)[0] >= 1


def test_container_built_in_trace_breaks():
    def f(x):
        seq = nn.Sequential()
        seq.append(nn.ReLU())
        return seq(x)

    x = torch.randn(4)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), f(x))
    assert _breaks(f, x)[0] >= 1


def test_attribute_write_on_fresh_module_breaks_and_matches():
    def f(a, b):
        loss = nn.MSELoss()
        loss.reduction = "sum"
        return loss(a, b)

    a, b = _loss_inputs(6)
    ref = f(a, b)
    opt = danlu_dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(a, b), ref)
    torch.testing.assert_close(opt(a, b), ref)
    assert _breaks(f, a, b)[0] >= 1


def test_returned_module_is_a_fresh_object_each_call():
    def f(x):
        act = nn.Softmax(dim=0)
        return act(x), act, act

    x = torch.randn(5)
    opt = danlu_dynamo.optimize("eager")(f)
    r1, r2 = opt(x), opt(x)
    for y, m, m_again in (r1, r2):
        torch.testing.assert_close(y, x.softmax(0))
        assert type(m) is nn.Softmax and m.dim == 0 and m.training
        assert m is m_again  # one object within a call
    assert r1[1] is not r2[1]  # a new one per call, as in eager
    r1[1].dim = 1  # the caller's object is its own: later calls do not see the write
    torch.testing.assert_close(opt(x)[0], x.softmax(0))


_STORE = []


def test_module_stored_on_global_is_fresh_each_call():
    def f(x):
        m = nn.Tanh()
        _STORE.append(m)
        return m(x)

    _STORE.clear()
    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(x), x.tanh())
    torch.testing.assert_close(opt(x), x.tanh())
    assert len(_STORE) == 2 and _STORE[0] is not _STORE[1]
    assert all(type(m) is nn.Tanh for m in _STORE)


def test_module_live_across_a_later_break():
    def f(x):
        act = nn.LeakyReLU(negative_slope=0.25)
        y = act(x)
        print("break")
        return act(y * 3)

    x = torch.randn(6)
    opt = danlu_dynamo.optimize("eager")(f)
    for _ in range(2):
        torch.testing.assert_close(opt(x), f(x))
    e = _explain(f, x)
    assert e.graph_break_count == 1 and not e.eager_regions


_ACT = nn.ReLU()


def test_appending_to_a_module_from_the_frame_breaks_and_matches():
    # The trace's calls read the real module: a traced append would be lost (wrong result).
    def f(x, seq):
        seq.append(_ACT)
        return seq(x)

    x = torch.randn(6)
    opt = danlu_dynamo.optimize("eager")(f)
    ref_seq, opt_seq = nn.Sequential(), nn.Sequential()
    for _ in range(2):
        torch.testing.assert_close(opt(x, opt_seq), f(x, ref_seq))
    assert len(opt_seq) == len(ref_seq) == 2
    assert _breaks(f, x, nn.Sequential())[0] >= 1
