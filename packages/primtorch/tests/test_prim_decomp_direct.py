"""Decompositions called directly on hand-picked arguments: every table entry at least once,
against eager ATen (values, dtype, shape, strides) and under torch's FakeTensorMode (the meta
path a tracer takes: the prims' meta functions must give eager's shape, dtype and strides)."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from danlu_primtorch.canonical import CANONICAL_OPS
from danlu_primtorch.prim_decompositions import (
    NOT_DECOMPOSED,
    PRIM_DECOMPOSITIONS,
    PrimDecompositionUnsupported,
    prim_decomposition_table,
)
from danlu_primtorch.prims import is_prim

aten = torch.ops.aten
TABLE = prim_decomposition_table()
G = torch.Generator().manual_seed(7)


def r(*shape, dtype=torch.float32, low=-3, high=3):
    if dtype == torch.bool:
        return torch.rand(shape, generator=G) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=G) * (high - low) + low).to(dtype)
    return torch.randint(low, high + 1, shape, generator=G, dtype=dtype)


def nc(t):
    """A non-contiguous copy (transposed storage) of t."""
    if t.dim() < 2:
        return torch.stack([t, t], -1)[..., 0]
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


X = r(3, 4)
XI = r(3, 4, dtype=torch.int64)
XB = r(3, 4, dtype=torch.bool)
X4 = r(2, 3, 4, 5)
SAMPLES = [
    (aten.add.Tensor, (nc(X), r(4)), {"alpha": 2}),
    (aten.add.Tensor, (XI, 2.5), {}),
    (aten.add.Tensor, (r(3, 4, dtype=torch.bfloat16), r(1, 4)), {}),
    (aten.sub.Tensor, (XI, r(3, 1, dtype=torch.int32)), {"alpha": 3}),
    (aten.mul.Tensor, (XB, 3), {}),
    (aten.div.Tensor, (XI, r(4, dtype=torch.int64, low=1)), {}),
    (aten.div.Tensor_mode, (X, r(4, low=1)), {"rounding_mode": "floor"}),
    (aten.div.Tensor_mode, (-X, r(3, 1, low=1)), {"rounding_mode": "floor"}),
    (aten.div.Tensor_mode, (XI, r(4, dtype=torch.int64, low=1)), {"rounding_mode": "floor"}),
    (aten.div.Tensor_mode, (XI, -r(4, dtype=torch.int64, low=1)), {"rounding_mode": "trunc"}),
    (aten.pow.Tensor_Scalar, (X.abs(), 2.5), {}),
    (aten.pow.Tensor_Scalar, (XI.abs(), 3), {}),
    (aten.pow.Scalar, (2.0, X), {}),
    (aten.pow.Scalar, (3, XI.abs()), {}),
    (aten.pow.Tensor_Tensor, (X.abs(), r(4)), {}),
    (aten.hypot.default, (X * 1e30, r(4) * 1e30), {}),
    (
        aten.fmax.default,
        (torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0])),
        {},
    ),
    (
        aten.fmin.default,
        (torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0])),
        {},
    ),
    (aten.sigmoid.default, (r(3, 4, dtype=torch.float16) * 5,), {}),
    (aten.sigmoid.default, (XI,), {}),
    (aten.round.decimals, (X * 100,), {"decimals": 2}),
    (aten.round.decimals, (X * 100,), {"decimals": -1}),
    (aten.logical_xor.default, (X, XI), {}),
    (aten.logical_not.default, (nc(X),), {}),
    (aten.isnan.default, (XI,), {}),
    (aten.signbit.default, (torch.tensor([-0.0, 0.0, -1.0]),), {}),
    (aten.bitwise_left_shift.Tensor, (XI, r(4, dtype=torch.int64, low=0, high=5)), {}),
    (aten.bitwise_right_shift.Tensor, (XI, torch.tensor(1)), {}),
    (aten.nextafter.default, (X, r(4)), {}),
    (aten.bitwise_not.default, (nc(XI),), {}),
    (aten.bitwise_and.Tensor, (XB, nc(XB)), {}),
    (aten.copysign.Tensor, (XI, torch.tensor(-1.0)), {}),
    *[(getattr(aten, n).Scalar, (nc(X), 0.5), {}) for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[(getattr(aten, n).Tensor, (XI, torch.tensor(1.5)), {}) for n in ("eq", "lt")],
    (aten.where.self, (XB, XI, torch.tensor(2.5, dtype=torch.float64)), {}),
    (aten.where.self, (r(4, dtype=torch.bool), X, torch.tensor(0.0, dtype=torch.float64)), {}),
    (aten._to_copy.default, (nc(X),), {"dtype": torch.int32}),
    (aten._to_copy.default, (X4,), {"memory_format": torch.channels_last}),
    (aten.clone.default, (X4.permute(0, 2, 3, 1),), {}),
    (aten.clone.default, (X4[..., ::2],), {"memory_format": torch.contiguous_format}),
    (aten.copy.default, (nc(X), r(4, dtype=torch.float64)), {}),
    (aten.sum.dim_IntList, (XB, [1]), {"keepdim": True}),
    (aten.sum.dim_IntList, (r(3, 4, dtype=torch.bfloat16), None), {}),
    (aten.sum.dim_IntList, (X, [-1, 0]), {"dtype": torch.float64}),
    (aten.prod.dim_int, (XI, 0), {}),
    (aten.prod.dim_int, (XB, 1), {"keepdim": True}),
    (aten.amax.default, (nc(X), [0]), {}),
    (aten.amax.default, (X4, []), {"keepdim": True}),
    (aten.sum.dim_IntList, (X4, []), {}),
    (aten.var.correction, (X4, []), {}),
    (aten.sum.dim_IntList, (torch.tensor(2.5), [0]), {"keepdim": True}),
    (aten.amin.default, (torch.tensor(2.5), [-1]), {}),
    (aten.amin.default, (XI,), {}),
    (aten.var.correction, (X4, [1, 3]), {"correction": 0, "keepdim": True}),
    (aten.var.correction, (r(5, dtype=torch.bfloat16),), {}),
    (aten.argmax.default, (X,), {"keepdim": True}),
    (aten.argmin.default, (X4, 2), {}),
    (aten.any.dims, (XI, [1]), {}),
    (aten.any.dims, (r(3, 4, dtype=torch.uint8, low=0, high=1),), {"keepdim": True}),
    (aten.all.dims, (X, None), {}),
    (aten.all.dims, (nc(XI), []), {}),
    (aten.any.dims, (X4, []), {"keepdim": True}),
    (aten.cumsum.default, (XI, 1), {}),
    (aten.cumsum.default, (r(6, dtype=torch.bfloat16), 0), {}),
    (aten.cumprod.default, (nc(X), 0), {"dtype": torch.float64}),
    (aten.sort.default, (nc(X), 0, True), {}),
    (aten.sort.stable, (XI,), {"stable": True, "dim": 1}),
    (aten.topk.default, (r(4, 9), 3, 1, False), {}),
    (aten.view.default, (X4, [6, -1]), {}),
    (aten.permute.default, (X4, [-1, 2, 0, 1]), {}),
    (aten.expand.default, (r(3, 1), [2, -1, 5]), {}),
    (aten.slice.Tensor, (X4, 3, -4, 100, 2), {}),
    (aten.slice.Tensor, (X4, 1, 2, 1), {}),
    (aten.select.int, (X4, 2, -1), {}),
    (aten.unsqueeze.default, (nc(X), -1), {}),
    (aten.squeeze.dims, (r(3, 1, 4, 1), [1, 2, -1]), {}),
    (aten.as_strided.default, (X4, [2, 2], [3, 1]), {"storage_offset": 4}),
    (aten.alias.default, (nc(X),), {}),
    (aten.cat.default, ([XI, X, torch.empty(0)], 1), {}),
    (aten.cat.default, ([nc(X), nc(X)], -2), {}),
    (aten.constant_pad_nd.default, (X4, [1, 2, -1, 0]), {"value": 1.5}),
    (aten.gather.default, (X, 1, r(3, 2, dtype=torch.int64, low=0, high=3)), {}),
    (aten.scatter.src, (X, 0, torch.tensor([[2, 0, 1, 2]]), r(1, 4)), {}),
    (aten.scatter.value, (X, 1, torch.tensor([[3], [0], [1]]), 9.0), {}),
    (aten.scatter_add.default, (X, 0, r(5, 4, dtype=torch.int64, low=0, high=2), r(5, 4)), {}),
    (
        aten.scatter_reduce.two,
        (X, 0, r(5, 4, dtype=torch.int64, low=0, high=2), r(5, 4), "amax"),
        {"include_self": False},
    ),
    (aten.index.Tensor, (X4, [None, torch.tensor([-1, 0]), torch.tensor([[1], [3]])]), {}),
    (aten.index.Tensor, (X4, [torch.tensor([1, 0]), None, torch.tensor([2, 3])]), {}),
    (aten.index_put.default, (X4, [torch.tensor([0, 1, 0])], torch.tensor(5.0)), {}),
    (aten.index_put.default, (X, [None, torch.tensor([0, 0, 3])], r(3, 1)), {"accumulate": True}),
    (aten.index_select.default, (nc(X), 1, torch.tensor([3, -0, 1], dtype=torch.int32)), {}),
    (aten.full.default, ([2, 3], 4), {}),
    (aten.full.default, ([2, 3], True), {"dtype": torch.float16}),
    (aten.empty_strided.default, ([2, 3], [1, 2]), {}),
    (aten.scalar_tensor.default, (2.5,), {"dtype": torch.int32}),
    (aten.arange.start_step, (2, 17, 3), {}),
    (aten.arange.start_step, (-1.0, 2.0, 0.3), {}),
    (aten.arange.start_step, (10, 0, -3), {"dtype": torch.float32}),
    (aten.rand.default, ([3, 5],), {}),
    (aten.randn.default, ([4],), {"dtype": torch.float64}),
    (aten.randint.low, (-3, 9, [7]), {}),
    (aten.rand.generator, ([3, 5],), {"generator": torch.Generator().manual_seed(1)}),
    (aten.randn.generator, ([6],), {"generator": torch.Generator().manual_seed(2)}),
    (aten.bernoulli.default, (torch.rand(3, 4, generator=G),), {}),
    (aten.mm.default, (X, nc(r(4, 2))), {}),
    (aten.bmm.default, (r(2, 3, 4), r(2, 4, 5)), {}),
    (aten.addmm.default, (r(5), X, r(4, 5)), {"beta": 0.5, "alpha": 2}),
    (aten.addmm.default, (torch.full((3, 5), float("nan")), X, r(4, 5)), {"beta": 0}),
    (
        aten.convolution.default,
        (r(2, 4, 7, 6), r(6, 2, 3, 3), r(6), [1], [1], [1], False, [0], 2),
        {},
    ),
    (
        aten.convolution.default,
        (
            r(2, 3, 7, 6).contiguous(memory_format=torch.channels_last),
            r(4, 3, 3, 3),
            None,
            [2, 1],
            [0, 1],
            [1, 1],
            False,
            [0, 0],
            1,
        ),
        {},
    ),
    (
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        (r(2, 3, 5, 8), r(2, 3, 6, 8), r(2, 3, 6, 8)),
        {},
    ),
    (
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        (r(2, 5, 3, 8).transpose(1, 2), r(2, 3, 6, 8), r(2, 3, 6, 8)),
        {},
    ),
    (
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8), 0.0, True),
        {"scale": 0.2},
    ),
    (
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        (r(1, 2, 5, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)),
        {"attn_mask": r(5, 6)},
    ),
]


def _conv_backward_sample(
    xs, ws, stride, padding, dilation, transposed, out_pad, groups, mask, channels_last=False
):
    x, w = r(*xs, dtype=torch.float64), r(*ws, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = aten.convolution.default(x, w, None, stride, padding, dilation, transposed, out_pad, groups)
    gy = r(*y.shape, dtype=torch.float64)
    bias = [w.shape[1] * groups if transposed else w.shape[0]]
    return (
        aten.convolution_backward.default,
        (gy, x, w, bias, stride, padding, dilation, transposed, out_pad, groups, mask),
        {},
    )


def _sdpa_backward_sample(causal, **kwargs):
    q, k, v = r(2, 3, 5, 8), r(2, 3, 6, 8), r(2, 3, 6, 8)
    if causal:
        k, v = k[:, :, :5], v[:, :, :5]
    o, lse = aten._scaled_dot_product_flash_attention_for_cpu.default(
        q, k, v, 0.0, causal, **kwargs
    )
    return (
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
        (r(*o.shape), q, k, v, o, lse, 0.0, causal),
        kwargs,
    )


SAMPLES += [
    _conv_backward_sample(
        (2, 4, 9, 8), (6, 2, 3, 3), [2, 1], [1, 0], [1, 2], False, [0, 0], 2, [True, True, True]
    ),
    _conv_backward_sample((2, 3, 10), (4, 3, 3), [1], [1], [1], False, [0], 1, [True, False, True]),
    _conv_backward_sample(
        (2, 4, 5, 5),
        (4, 3, 3, 3),
        [2, 2],
        [1, 1],
        [1, 1],
        True,
        [1, 0],
        1,
        [True, True, False],
        channels_last=True,
    ),
    _conv_backward_sample(
        (1, 6, 7, 7), (6, 1, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 6, [False, True, True]
    ),
    _sdpa_backward_sample(False),
    _sdpa_backward_sample(True, scale=0.3),
    _sdpa_backward_sample(False, attn_mask=r(5, 6)),
]

_BITS = ("bitwise", "shift")


def _auto_sample(op):
    """One sample for the remaining pointwise ops: non-contiguous, broadcasting operands."""
    tensors = [a for a in op._schema.arguments if a.type.kind() == "TensorType"]
    if len(tensors) != len(op._schema.arguments) or len(tensors) not in (1, 2):
        return None
    name = str(op)
    if any(b in name for b in _BITS):
        return (op, (nc(XI), r(4, dtype=torch.int64, low=0, high=3))[: len(tensors)], {})
    low, high = (
        (-0.9, 0.9)
        if any(n in name for n in ("asin", "acos", "atanh", "erfinv"))
        else ((1.1, 4) if "acosh" in name else (0.1, 3))
    )
    return (op, (nc(r(3, 4, low=low, high=high)), r(4, low=low, high=high))[: len(tensors)], {})


SAMPLES += [s for s in (_auto_sample(op) for op in TABLE if op not in {x[0] for x in SAMPLES}) if s]

RANDOM = {aten.rand.default, aten.randn.default, aten.randint.low, aten.bernoulli.default}
UNINITIALISED = {aten.empty_strided.default}


def _reseed(kwargs):
    torch.manual_seed(3)
    for v in kwargs.values():
        if isinstance(v, torch.Generator):
            v.manual_seed(4)


def _ids():
    return [f"{op.__name__}-{i}" for i, (op, _, _) in enumerate(SAMPLES)]


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES, ids=_ids())
def test_decomposition_matches_eager(op, args, kwargs):
    _reseed(kwargs)
    expected = op(*args, **kwargs)
    _reseed(kwargs)  # RNG prims draw from the same stream as eager: same bits
    actual = TABLE[op](*args, **kwargs)
    for e, a in zip(tree_flatten(expected)[0], tree_flatten(actual)[0], strict=True):
        if not isinstance(e, torch.Tensor):
            continue
        assert a.shape == e.shape and a.dtype == e.dtype
        if e.numel() > 1:
            sig = [(n, s) for n, s in zip(e.shape, e.stride()) if n > 1]
            assert sig == [(n, s) for n, s in zip(a.shape, a.stride()) if n > 1], (
                a.stride(),
                e.stride(),
            )
        if op not in UNINITIALISED:
            # float16/bfloat16 rounding of a float32 result may differ by one ulp
            low = e.dtype in (torch.float16, torch.bfloat16)
            torch.testing.assert_close(
                a, e, equal_nan=True, **({"rtol": 1e-2, "atol": 1e-2} if low else {})
            )


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES, ids=_ids())
def test_decomposition_traces_on_fake_tensors(op, args, kwargs):
    expected = op(*args, **kwargs)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake_args = tree_map(
            lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
        )
        actual = TABLE[op](*fake_args[0], **fake_args[1])
    for e, a in zip(tree_flatten(expected)[0], tree_flatten(actual)[0], strict=True):
        if isinstance(e, torch.Tensor):
            assert a.shape == e.shape and a.dtype == e.dtype, op
            if e.numel() > 1:
                sig = [(n, s) for n, s in zip(e.shape, e.stride()) if n > 1]
                assert sig == [(n, s) for n, s in zip(a.shape, a.stride()) if n > 1], op


def test_canonical_ops_are_decomposed_or_listed():
    # The canonical set belongs to its own module and may grow before this table does: a gap
    # is reported by name; the bar is that nearly all of it reaches prims.
    missing = [str(op) for op in CANONICAL_OPS if op not in TABLE and op not in NOT_DECOMPOSED]
    assert len(missing) <= 0.05 * len(CANONICAL_OPS), f"no prim decomposition for {missing}"
    assert not set(TABLE) & set(NOT_DECOMPOSED)
    assert all(isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" for op in TABLE)


def test_every_table_entry_has_a_direct_sample():
    covered = {op for op, _, _ in SAMPLES}
    assert not set(TABLE) - covered, sorted(map(str, set(TABLE) - covered))


def test_unsupported_arguments_keep_the_aten_op():
    # the table says NotImplemented (keep the op); the raw function says why
    assert TABLE[aten.index.Tensor](X, [XB]) is NotImplemented
    with pytest.raises(PrimDecompositionUnsupported, match="data-dependent"):
        PRIM_DECOMPOSITIONS[aten.index.Tensor](X, [XB])
    qkv = (r(1, 1, 2, 4), r(1, 1, 2, 4), r(1, 1, 2, 4))
    assert TABLE[aten._scaled_dot_product_flash_attention_for_cpu.default](*qkv, 0.5) is (
        NotImplemented
    )


def test_bad_input_raises_like_eager():
    with pytest.raises(RuntimeError, match="not compatible"):
        TABLE[aten.view.default](X.t(), [12])
    with pytest.raises(RuntimeError, match="broadcastable"):
        TABLE[aten.add.Tensor](X, r(5))


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES, ids=_ids())
def test_decompositions_emit_only_prims(op, args, kwargs):
    with _RecordOps() as rec:
        out = TABLE[op](*args, **kwargs)
    assert out is not NotImplemented
    assert rec.ops, "a decomposition that calls no prim"
    others = sorted({str(f) for f in rec.ops if not is_prim(f)})
    assert not others, f"{op} reaches non-prim ops {others}"
