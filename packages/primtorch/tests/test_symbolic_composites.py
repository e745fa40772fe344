"""matmul/linear from mm, bmm and views: the same function as torch's composites, on real
tensors (values and gradients, non-contiguous and broadcast inputs) and on symbolic fakes
(sizes stay symbolic, no guard pins them)."""

import pytest
import torch

from danlu_primtorch import FakeTensorMode
from danlu_primtorch.symbolic import ShapeEnv
from danlu_primtorch.symbolic.composites import SymbolicCompositeMode, linear, matmul

# (shape of a, shape of b): every branch of matmul
MATMUL_SHAPES = [
    ((5,), (5,)),
    ((3, 5), (5,)),
    ((5,), (5, 4)),
    ((3, 5), (5, 4)),
    ((2, 3, 5), (5,)),
    ((2, 3, 5), (5, 4)),
    ((2, 6, 3, 5), (5, 4)),
    ((5,), (2, 5, 4)),
    ((3, 5), (2, 5, 4)),
    ((2, 3, 5), (2, 5, 4)),
    ((2, 1, 3, 5), (4, 5, 6)),
    ((7, 2, 3, 5), (2, 5, 4)),
    ((2, 3, 5), (5, 4)),
]


def _noncontiguous(shape, gen):
    """A tensor of ``shape`` whose memory order is reversed (a transposed copy)."""
    t = torch.randn(*reversed(shape), dtype=torch.float64, generator=gen)
    return t.permute(*reversed(range(len(shape))))


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False])
def test_matmul_matches_torch_values_and_gradients(shapes, contiguous):
    gen = torch.Generator().manual_seed(0)
    make = (
        (lambda s: torch.randn(*s, dtype=torch.float64, generator=gen))
        if contiguous
        else (lambda s: _noncontiguous(s, gen))
    )
    a, b = make(shapes[0]).requires_grad_(), make(shapes[1]).requires_grad_()
    ref = torch.matmul(a, b)
    out = matmul(a, b)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref)
    g = torch.randn(ref.shape, dtype=torch.float64, generator=gen)
    ref_grads = torch.autograd.grad(ref, (a, b), g)
    out_grads = torch.autograd.grad(out, (a, b), g)
    for r, o in zip(ref_grads, out_grads):
        torch.testing.assert_close(o, r)


@pytest.mark.parametrize("x_shape", [(5,), (3, 5), (2, 3, 5), (2, 4, 3, 5)], ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_torch(x_shape, bias):
    gen = torch.Generator().manual_seed(1)
    x = _noncontiguous(x_shape, gen).requires_grad_()
    w = torch.randn(4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, generator=gen, requires_grad=True) if bias else None
    ref = torch.nn.functional.linear(x, w, b)
    out = linear(x, w, b)
    torch.testing.assert_close(out, ref)
    leaves = (x, w) + ((b,) if bias else ())
    g = torch.randn(ref.shape, dtype=torch.float64, generator=gen)
    for r, o in zip(torch.autograd.grad(ref, leaves, g), torch.autograd.grad(out, leaves, g)):
        torch.testing.assert_close(o, r)


def test_mismatched_batch_sizes_raise():
    with pytest.raises(RuntimeError, match="do not broadcast"):
        matmul(torch.randn(3, 2, 5), torch.randn(4, 5, 2))


def test_mode_keeps_sizes_symbolic_without_guards():
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    real = torch.randn(2, 7, 3, 32)  # made outside the mode: a real tensor to fake
    with mode:
        x = mode.from_real(real, dynamic_dims=[1], source="x")
        w = torch.randn(16, 32)
        with SymbolicCompositeMode():
            y = torch.nn.functional.linear(x, w)
            z = x @ torch.randn(32, 8)
            zz = torch.matmul(x.transpose(-1, -2), x)  # batched, both symbolic
    assert isinstance(y.shape[1], torch.SymInt) and y.shape[-1] == 16
    assert isinstance(z.shape[1], torch.SymInt) and z.shape[-1] == 8
    assert isinstance(zz.shape[1], torch.SymInt) and zz.shape[-1] == 32
    assert env.guards == []


def test_mode_leaves_static_calls_to_torch():
    calls = []

    class Spy(SymbolicCompositeMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    with Spy():
        out = torch.nn.functional.linear(torch.ones(2, 3), torch.ones(4, 3))
    torch.testing.assert_close(out, torch.full((2, 4), 3.0))
    assert torch.nn.functional.linear in calls or torch._C._nn.linear in calls
