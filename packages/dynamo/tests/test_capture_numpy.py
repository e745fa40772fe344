"""NumPy code on arrays made from tensors is traced as tensor ops: one graph, NumPy's dtypes
and shapes, NumPy scalars where eager gives them, writes through an array visible in the
tensor it shares memory with. Each program runs eagerly and captured on fresh inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import danlu_dynamo


def _same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    elif isinstance(a, np.ndarray):
        assert type(b) is np.ndarray, type(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    elif isinstance(a, np.generic):
        assert type(a) is type(b), (type(a), type(b))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert type(a) is type(b) and a == b, (a, b)


def _run(fn, make, calls=3, graphs=1):
    opt = danlu_dynamo.optimize("eager")(fn)
    for seed in range(calls):
        g = torch.Generator().manual_seed(seed)
        args = make(g)
        args_e = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        args_c = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        expected = fn(*args_e)
        got = opt(*args_c)
        _same(expected, got)
        _same(args_e, args_c)  # writes through arrays reach the tensors they share
    ctx = opt._capture_ctx
    if graphs is not None:
        assert not ctx.breaks, [str(b) for b in ctx.breaks]
        assert sum(1 for r in ctx.records if r.num_ops) == graphs
    return opt


def f32(*shape):
    return lambda g: [torch.randn(*shape, generator=g)]


def two_f32(a, b):
    return lambda g: [torch.randn(*a, generator=g), torch.randn(*b, generator=g)]


def ints(*shape):
    return lambda g: [torch.randint(-5, 6, shape, generator=g)]


PROGRAMS = {
    "ufuncs": (lambda x: torch.from_numpy(np.tanh(np.exp(x.numpy()) - 1) * np.sqrt(np.abs(x.numpy()))), f32(3, 4)),
    "exp_of_ints_is_float64": (lambda x: torch.from_numpy(np.exp(x.numpy() * 0.1)), ints(5)),
    "int_true_divide": (lambda x: torch.from_numpy(x.numpy() / 3), ints(4, 2)),
    "int_floor_mod": (lambda x: torch.from_numpy((x.numpy() // 2) + (x.numpy() % 3)), ints(6)),
    "python_float_keeps_float32": (lambda x: torch.from_numpy(x.numpy() * 2.5 + 1), f32(2, 3)),
    "mixed_dtypes": (
        lambda x, y: torch.from_numpy(x.numpy() + y.numpy()),
        lambda g: [torch.randn(3, generator=g), torch.randint(0, 4, (3,), generator=g, dtype=torch.int32)],
    ),
    "reductions_axis": (
        lambda x: tuple(
            torch.from_numpy(v)
            for v in (
                x.numpy().sum(axis=0), np.mean(x.numpy(), axis=1, keepdims=True),
                x.numpy().max(axis=1), np.min(x.numpy(), axis=(0, 1), keepdims=True),
                np.std(x.numpy(), axis=0, ddof=1), np.var(x.numpy(), axis=1),
                np.argmax(x.numpy(), axis=1), np.cumsum(x.numpy(), axis=0),
            )
        ),
        f32(4, 5),
    ),
    "full_reductions_are_numpy_scalars": (
        lambda x: (x.numpy().sum(), np.mean(x.numpy()), x.numpy().max(), np.argmin(x.numpy())),
        f32(3, 3),
    ),
    "shapes": (
        lambda x: torch.from_numpy(
            np.concatenate([x.numpy().reshape(2, -1).T, np.expand_dims(x.numpy().ravel(), 1)[:3]], axis=1)
        ),
        f32(2, 3),
    ),
    "stack_transpose_swap": (
        lambda x, y: torch.from_numpy(np.stack([x.numpy(), y.numpy()], axis=1).transpose(2, 0, 1).swapaxes(0, 1)),
        two_f32((3, 4), (3, 4)),
    ),
    "matmul_where_clip": (
        lambda x, y: torch.as_tensor(np.where((x.numpy() @ y.numpy().T) > 0, 1.0, -1.0).clip(-0.5, 2)),
        two_f32((3, 4), (5, 4)),
    ),
    "operators": (
        lambda x: torch.from_numpy(-(2 - x.numpy()) ** 2 + abs(x.numpy()) * (x.numpy() > 0)),
        f32(4),
    ),
    "methods": (
        lambda x: torch.tensor(x.numpy().astype(np.float64).copy().reshape(3, 2).sum(axis=1)),
        f32(2, 3),
    ),
    "indexing": (
        lambda x: (torch.from_numpy(x.numpy()[1:, ::2] * 2), x.numpy()[0, 1], torch.from_numpy(x.numpy()[0])),
        f32(3, 4),
    ),
    "returns_arrays": (lambda x: (x.numpy(), np.exp(x.numpy()).astype(np.float16)), f32(2, 2)),
    "numpy_scalar_constants": (
        lambda x: (x * np.float32(1.5), torch.tensor(np.float64(2.5)), torch.tensor(np.int32(3)) + x),
        f32(3),
    ),
    "like_constructors": (
        lambda x: torch.from_numpy(np.zeros_like(x.numpy()) + np.full_like(x.numpy(), 2) * np.ones_like(x.numpy())),
        f32(2, 3),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_numpy_program_is_one_graph_matching_eager(name):
    fn, make = PROGRAMS[name]
    _run(fn, make)


def test_writes_through_an_array_reach_its_tensor():
    def setitem(x):
        a = x.numpy()
        a[0] = 7.0
        a[:, 1] += 1
        return x * 2

    def inplace_operator(x):
        a = x.numpy()
        a *= 3
        a += np.ones_like(a)
        return torch.from_numpy(a) - 1

    _run(setitem, f32(3, 2))
    _run(inplace_operator, f32(4))


def test_returned_array_shares_memory_with_its_tensor():
    def f(x):
        return x, x.numpy()

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(3)
    t, a = opt(x)
    assert isinstance(a, np.ndarray) and np.shares_memory(a, t.numpy())
    a[0] = 42.0
    assert x[0] == 42.0


def test_data_dependent_numpy_breaks_the_graph_and_stays_correct():
    def f(x):
        a = np.exp(x.numpy())
        idx = np.nonzero(a > 1)[0]  # the size depends on the data
        return torch.from_numpy(a[idx] * 2)

    opt = _run(f, f32(6), graphs=None)
    assert any("nonzero" in b.reason for b in opt._capture_ctx.breaks)


def test_numpy_of_a_tensor_that_requires_grad_is_left_to_eager():
    def f(x):
        return torch.from_numpy(x.detach().numpy() * 2) + x

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(3, requires_grad=True)
    out = opt(x)
    torch.testing.assert_close(out, x.detach() * 3)
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(3))
