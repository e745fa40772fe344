"""Fake tensors: metadata, views, in-place ops, conversion from real tensors, errors."""

import pytest
import torch

from danlu_primtorch import DataDependentOutputError, FakeTensor, FakeTensorMode
from danlu_primtorch.fake import FakeTensorMixingError


def same_meta(fake, real):
    assert isinstance(fake, FakeTensor)
    assert fake.shape == real.shape
    assert fake.dtype == real.dtype
    assert fake.stride() == real.stride()
    assert fake.storage_offset() == real.storage_offset()
    assert fake.device == real.device


def test_ops_follow_eager_metadata():
    real = torch.randn(4, 6)
    mode = FakeTensorMode()
    fake = mode.from_real(real)
    ops = [
        lambda t: t.t() @ t,
        lambda t: t[:, 1::2],
        lambda t: t.permute(1, 0).contiguous(),
        lambda t: t.sum(0, keepdim=True),
        lambda t: t.to(torch.float64),
        lambda t: t.view(2, 12).expand(3, 2, 12),
        lambda t: t[1:, 2:].unsqueeze(0),
    ]
    with mode:
        fakes = [op(fake) for op in ops]
    pairs = [(f, op(real)) for f, op in zip(fakes, ops)]
    for f, r in pairs:
        same_meta(f, r)


def test_views_and_inplace_keep_aliasing():
    mode = FakeTensorMode()
    with mode:
        x = torch.zeros(4, 5)
        v = x[1:3, ::2]
        assert v._base is x
        assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
        assert v.storage_offset() == 5 and v.stride() == (5, 2)
        out = v.mul_(2)
        assert out is v
        y = x.t_()
        assert y is x and x.stride() == (1, 5) and x.shape == (5, 4)
        z = torch.empty(3)
        z.resize_(2, 7)
        assert z.shape == (2, 7)


def test_from_real_memoizes_and_preserves_views():
    base = torch.randn(6, 8)
    a = base[2:, 1::2]
    b = base.view(48)
    p = torch.nn.Parameter(torch.randn(3, 3))
    mode = FakeTensorMode()
    fa, fb, fbase = mode.from_real(a), mode.from_real(b), mode.from_real(base)
    assert mode.from_real(a) is fa
    assert fa._base is fbase and fb._base is fbase
    same_meta(fa, a)
    fp = mode.from_real(p)
    assert fp.requires_grad and fp.is_leaf
    # tensors sharing a storage without being views share the fake storage too
    c = torch.empty(0).set_(base.untyped_storage(), 4, (3,), (2,))
    fc = mode.from_real(c)
    assert fc.untyped_storage()._cdata == fbase.untyped_storage()._cdata
    same_meta(fc, c)


def test_data_dependent_ops_raise():
    mode = FakeTensorMode()
    with mode:
        x = torch.randn(5)
        for f in (
            lambda: x.sum().item(),
            lambda: x.tolist(),
            lambda: bool(x.sum() > 0),
            lambda: torch.nonzero(x),
            lambda: torch.unique(x),
            lambda: torch.masked_select(x, x > 0),
            lambda: x[x > 0],
        ):
            with pytest.raises(DataDependentOutputError) as info:
                f()
            assert info.value.op is not None
        # a boolean-mask assignment has a static shape: fine
        x[x > 0] = 1.0
        assert x.shape == (5,)


def test_mixing_real_and_fake():
    mode = FakeTensorMode()
    real = torch.randn(3)
    with mode:
        x = torch.randn(3)
        with pytest.raises(FakeTensorMixingError):
            x + real
        y = x + torch.tensor(2.0)  # 0-dim CPU constant mixes like in eager
        assert isinstance(y, FakeTensor)
        z = x * torch.tensor([1.0, 2.0, 3.0])  # torch.tensor inside the mode is fake
        assert isinstance(z, FakeTensor)
    loose = FakeTensorMode(allow_non_fake_inputs=True)
    with loose:
        assert isinstance(torch.randn(3) + real, FakeTensor)


def test_autograd_on_fakes():
    mode = FakeTensorMode()
    with mode:
        w = torch.randn(4, 3, requires_grad=True)
        x = torch.randn(5, 4)
        loss = torch.nn.functional.gelu(x @ w).pow(2).mean()
        loss.backward()
        assert isinstance(w.grad, FakeTensor) and w.grad.shape == w.shape
        (g,) = torch.autograd.grad((x @ w).sin().sum(), w)
        assert g.shape == w.shape and g.stride() == w.stride()


def test_fallback_and_unsupported_are_clear_errors():
    from danlu_primtorch.fake.errors import UnsupportedFakeOp

    mode = FakeTensorMode(allow_fallback=False)
    with mode:
        x = torch.randn(3, 3)
        try:
            torch.linalg.cholesky(x)
        except UnsupportedFakeOp as e:
            assert "cholesky" in str(e)


def test_error_types_and_parameters():
    from danlu_primtorch import UnsupportedFakeOp

    assert issubclass(DataDependentOutputError, RuntimeError)
    assert issubclass(UnsupportedFakeOp, RuntimeError)
    assert issubclass(FakeTensorMixingError, RuntimeError)
    mode = FakeTensorMode()
    with mode:
        p = torch.nn.Parameter(torch.empty(3, 4, device="cuda"))
        assert isinstance(p, torch.nn.Parameter) and isinstance(p, FakeTensor)
        assert p.requires_grad and p.device == torch.device("cuda", 0)
    # a differentiable real view becomes a differentiable fake view of its base's fake
    base = torch.randn(4, 4, requires_grad=True)
    view = base[1:]
    fake_view = mode.from_real(view)
    assert fake_view._base is mode.from_real(base) and fake_view.requires_grad
    assert fake_view.grad_fn is not None
    with mode:
        (g,) = torch.autograd.grad(fake_view.sum(), mode.from_real(base))
    assert g.shape == base.shape
