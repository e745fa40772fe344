"""Capture coverage for constructs met in real models (transformers 5.17 and 5.24): each
program is checked against eager bit for bit through the "eager" backend, on two shapes, and
must be captured whole (no graph break, no eager region)."""

import pytest
import torch

import danlu_dynamo

SHAPES = [(4, 8), (3, 5, 6)]


def _capture_whole(fn, make_args):
    """Run ``fn`` eagerly and captured on two shapes; return the captured wrapper."""
    opt = danlu_dynamo.optimize("eager")(fn)
    for shape in SHAPES:
        torch.manual_seed(0)
        args = make_args(shape)
        ref = fn(*args)
        for _ in range(2):
            got = opt(*args)
            assert type(got) is type(ref)
            if isinstance(ref, torch.Tensor):
                assert torch.equal(ref, got)
                assert ref.requires_grad == got.requires_grad
            else:
                assert all(torch.equal(a, b) for a, b in zip(ref, got, strict=True))
    ctx = opt._capture_ctx
    assert not ctx.breaks, [str(b) for b in ctx.breaks]
    assert not ctx.eager_reasons, ctx.eager_reasons
    assert any(s.num_ops > 0 for s in ctx.records)
    return opt


# --------------------------------------------------------------------- hasattr on a constant


def hasattr_on_none(x, cache=None):
    # transformers' masking_utils: `hasattr(past_key_values, "is_sliding") and ...` with None
    if hasattr(cache, "is_sliding") and False in cache.is_sliding:
        return x * 2
    return x + 1


def hasattr_on_constants(x):
    y = x
    if hasattr(3, "real"):
        y = y * 3
    if not hasattr("s", "nope"):
        y = y - 1
    if getattr(None, "is_sliding", None) is None:
        y = y.cos()
    return y


@pytest.mark.parametrize("fn", [hasattr_on_none, hasattr_on_constants])
def test_hasattr_of_constants(fn):
    _capture_whole(fn, lambda s: (torch.randn(s),))


# --------------------------------------------------------- torch.no_grad() used as a decorator


@torch.no_grad()
def _no_grad_helper(x, w):
    return (x @ w).sin() * 2


@torch.no_grad
def _no_grad_bare(x):
    return x.exp()


@torch.enable_grad()
def _enable_grad_helper(x):
    return x * 3


@torch.set_grad_enabled(False)
def _set_grad_helper(x):
    return x - 1


class _Rotary(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("inv_freq", torch.arange(n, dtype=torch.float32) / n)

    @torch.no_grad()
    def forward(self, x):
        return x * self.inv_freq


def decorated_no_grad(x, w):
    y = x * w.sum()  # tracks grad
    z = _no_grad_helper(x, w.t() @ w)  # no grad inside the decorated function
    return y + z + _no_grad_bare(x)


def decorated_modes(x, w):
    y = x * w.mean()
    with torch.no_grad():
        a = _enable_grad_helper(y)  # grad back on inside
    b = _set_grad_helper(y)
    return a + b + y


_rot = {n: _Rotary(n) for n in (8, 6)}


def decorated_module_forward(x, w):
    mod = _rot[x.shape[-1]]
    return mod(x * w.sum()) + x


def _grad_args(shape):
    x = torch.randn(shape)
    w = torch.randn(shape[-1], shape[-1], requires_grad=True)
    return x, w


@pytest.mark.parametrize("fn", [decorated_no_grad, decorated_modes, decorated_module_forward])
def test_context_manager_decorator_is_inlined(fn):
    _capture_whole(fn, _grad_args)
    assert torch.is_grad_enabled()


def test_no_grad_decorator_backward_matches_eager():
    def loss(x, w):
        return decorated_no_grad(x, w).pow(2).sum() + decorated_modes(x, w).sum()

    opt = danlu_dynamo.optimize("eager")(loss)
    for shape in SHAPES:
        torch.manual_seed(1)
        x, w = _grad_args(shape)
        loss(x, w).backward()
        ref = w.grad
        w.grad = None
        opt(x, w).backward()
        assert torch.equal(ref, w.grad)
    assert not opt._capture_ctx.breaks
