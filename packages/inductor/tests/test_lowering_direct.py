"""Individual lowerings called directly (no tracing, no code generation): the IR they build has
ATen's sizes and dtypes, realized results have the strides the layout promises, and the loop
bodies, run by the reference interpreter (ir_eval.py), give ATen's values."""

from __future__ import annotations

import pytest
import torch
from ir_eval import LoweringContext

from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.verify import verify_graph
from danlu_inductor.lowering import LOWERINGS, NotLowered

aten = torch.ops.aten


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rand(*size, dtype=torch.float32, seed=0):
    g = gen(seed)
    if dtype.is_floating_point:
        return torch.randn(*size, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, size, generator=g).bool()
    return torch.randint(-5, 6, size, generator=g).to(dtype)


def run_lowering(op, tensors, *args, **kwargs):
    """Call ``op``'s lowering on boxes of ``tensors`` (``args`` may hold ``T(i)`` standing
    for the i-th of them); -> (context, output node(s))."""
    ctx = LoweringContext(*tensors)
    with ctx as (_, boxes):
        out = LOWERINGS[op](*substitute(args, boxes), **kwargs)
        verify_graph(ctx.graph)  # the buffers it realized are well formed
    return ctx, out


class T:
    """The i-th input tensor (a box when lowering, the tensor when running eagerly)."""

    def __init__(self, i):
        self.i = i


def substitute(args, values):
    if isinstance(args, (list, tuple)):
        return type(args)(substitute(a, values) for a in args)
    return values[args.i] if isinstance(args, T) else args


def check(op, tensors, *args, rtol=1.3e-6, atol=1e-5, **kwargs):
    ctx, out = run_lowering(op, tensors, *args, **kwargs)
    expected = op(*substitute(args, tensors), **kwargs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    exps = expected if isinstance(expected, (list, tuple)) else [expected]
    assert len(outs) == len(exps)
    for o, e in zip(outs, exps):
        assert [int(s) for s in o.get_size()] == list(e.shape), op
        assert o.get_dtype() == e.dtype, op
        got = ctx.values(o)
        torch.testing.assert_close(got, e, rtol=rtol, atol=atol, equal_nan=True)
    return ctx, out


# ------------------------------------------------------------------ pointwise


@pytest.mark.parametrize(
    "op, dtypes, extra",
    [
        (aten.add.Tensor, (torch.float32, torch.int64), {}),
        (aten.add.Tensor, (torch.int32, torch.int64), {"alpha": 3}),
        (aten.sub.Tensor, (torch.float64, torch.float32), {}),
        (aten.mul.Tensor, (torch.bool, torch.int16), {}),
        (aten.div.Tensor, (torch.int64, torch.int64), {}),  # true division: float result
        (aten.maximum.default, (torch.float32, torch.float32), {}),
        (aten.eq.Tensor, (torch.int64, torch.float32), {}),
        (aten.lt.Tensor, (torch.float16, torch.float32), {}),
        (aten.bitwise_and.Tensor, (torch.int32, torch.int32), {}),
        (aten.remainder.Tensor, (torch.int64, torch.int64), {}),
        (aten.atan2.default, (torch.float32, torch.float32), {}),
    ],
)
def test_binary_pointwise(op, dtypes, extra):
    a = rand(3, 1, 4, dtype=dtypes[0], seed=1)
    b = rand(5, 1, dtype=dtypes[1], seed=2)
    if op in (aten.remainder.Tensor,):
        b = torch.where(b == 0, torch.ones_like(b), b)
    ctx, out = check(op, [a, b], T(0), T(1), **extra)
    assert isinstance(out, ir.StorageBox) and isinstance(out.data, ir.Pointwise)
    assert not out.is_realized()  # pointwise results stay loops until someone stores them


@pytest.mark.parametrize(
    "op, dtype",
    [
        (aten.exp.default, torch.float32),
        (aten.exp.default, torch.int64),  # int -> float
        (aten.sigmoid.default, torch.float64),
        (aten.abs.default, torch.int32),
        (aten.neg.default, torch.float16),
        (aten.isnan.default, torch.float32),
        (aten.logical_not.default, torch.int64),
        (aten.floor.default, torch.int64),  # identity on ints
        (aten.bitwise_not.default, torch.bool),
        (aten.relu.default, torch.float32),
    ],
)
def test_unary_pointwise(op, dtype):
    check(op, [rand(4, 3, dtype=dtype, seed=3)], T(0))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -1, 1.7])
def test_pow_scalar_special_exponents(exponent):
    x = rand(6, seed=4).abs() + 0.1
    check(aten.pow.Tensor_Scalar, [x], T(0), exponent)


def test_scalar_operands_promote_like_torch():
    x = rand(4, dtype=torch.int32, seed=5)
    check(aten.mul.Tensor, [x], T(0), 2.5)  # int tensor * float scalar -> float32
    check(aten.add.Tensor, [x], T(0), 7)  # stays int32
    h = rand(4, dtype=torch.float16, seed=6)
    check(aten.mul.Tensor, [h], T(0), 1.5, rtol=1e-3, atol=1e-3)  # stays float16


def test_where_and_clamp():
    c = rand(3, 4, dtype=torch.bool, seed=7)
    a, b = rand(3, 4, seed=8), rand(4, dtype=torch.float64, seed=9)
    check(aten.where.self, [c, a, b], T(0), T(1), T(2))
    check(aten.clamp.default, [a], T(0), -0.5, 0.25)
    check(aten.clamp.Tensor, [a, b.float(), b.float() + 1], T(0), T(1), T(2))


def test_bool_subtraction_is_not_lowered():
    b = rand(3, dtype=torch.bool, seed=10)
    with pytest.raises(NotLowered):
        run_lowering(aten.sub.Tensor, [b, b], T(0), T(1))


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize(
    "op, args, kwargs",
    [
        (aten.sum.dim_IntList, ([1],), {}),
        (aten.sum.dim_IntList, ([0, 2],), {"keepdim": True}),
        (aten.amax.default, ([-1],), {}),
        (aten.argmax.default, (1,), {}),
        (aten.mean.dim, ([2],), {}),
        (aten.prod.dim_int, (0,), {}),
        (aten.var.correction, ([1],), {"correction": 1}),
        (aten.any.dim, (2,), {}),
        (aten.logsumexp.default, ([2],), {}),
    ],
)
def test_reductions(op, args, kwargs):
    x = rand(3, 5, 4, seed=11)
    if op is aten.any.dim:
        x = x > 1
    ctx, out = check(op, [x], T(0), *args, **kwargs, rtol=1e-5, atol=1e-5)
    # the reduction itself is realized with a contiguous layout of the kept sizes
    reds = [b for b in ctx.graph.buffers if isinstance(b, ir.ComputedBuffer) and b.is_reduction()]
    assert reds
    lay = reds[-1].layout
    assert lay.is_contiguous()


def test_integer_sum_accumulates_in_int64():
    x = rand(4, 6, dtype=torch.int8, seed=12) * 20
    ctx, out = check(aten.sum.dim_IntList, [x], T(0), [1])
    (red,) = [b for b in ctx.graph.buffers if isinstance(b, ir.ComputedBuffer)]
    assert red.data.src_dtype == torch.int64 and red.get_dtype() == torch.int64


def test_softmax_log_softmax_layer_norm():
    x = rand(4, 7, seed=13)
    check(aten._softmax.default, [x], T(0), -1, False)
    check(aten._log_softmax.default, [x], T(0), 1, False)
    w, b = rand(7, seed=14), rand(7, seed=15)
    ctx, outs = check(aten.native_layer_norm.default, [x, w, b], T(0), [7], T(1), T(2), 1e-5)
    assert [o.get_dtype() for o in outs] == [torch.float32] * 3


def test_half_softmax_computes_in_float32():
    x = rand(3, 9, dtype=torch.bfloat16, seed=16)
    ctx, out = check(aten._softmax.default, [x], T(0), -1, False, rtol=1e-2, atol=1e-2)
    reds = [b for b in ctx.graph.buffers if isinstance(b, ir.ComputedBuffer) and b.is_reduction()]
    assert reds and all(r.data.src_dtype == torch.float32 for r in reds)


# --------------------------------------------------------- creation and indexing


def test_full_arange_and_scalar_tensor():
    ctx, out = run_lowering(aten.full.default, [], [2, 3], 1.5, dtype=torch.float64)
    assert out.get_dtype() == torch.float64
    torch.testing.assert_close(ctx.values(out), torch.full((2, 3), 1.5, dtype=torch.float64))
    ctx, out = run_lowering(aten.arange.start_step, [], 3, 17, 4, dtype=torch.int64)
    torch.testing.assert_close(ctx.values(out), torch.arange(3, 17, 4))


def test_cat_and_pad():
    a, b = rand(2, 3, seed=17), rand(2, 5, dtype=torch.float64, seed=18)
    check(aten.cat.default, [a, b], [T(0), T(1)], 1)
    check(aten.constant_pad_nd.default, [a], T(0), [1, 2, 0, 1], 9.0)


def test_gather_index_embedding():
    x = rand(5, 4, seed=19)
    idx = torch.tensor([[0, 3], [4, 1], [2, 2]])
    check(aten.index.Tensor, [x, idx], T(0), [T(1)])
    check(aten.gather.default, [x, torch.tensor([[1, 0], [3, 3]])], T(0), 1, T(1))
    check(aten.embedding.default, [x, torch.tensor([4, 2, 0])], T(0), T(1))
    check(aten.index_select.default, [x, torch.tensor([3, 1])], T(0), 1, T(1))


def test_to_copy_changes_dtype_only():
    x = rand(3, 4, seed=20).t()
    ctx, out = check(aten._to_copy.default, [x], T(0), dtype=torch.int32)
    assert out.get_dtype() == torch.int32
