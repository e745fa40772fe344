"""ATen's argument conventions (None vs [] dims, negative dims, keepdim, 0-d and empty
inputs, out-of-range slices, -1 sizes) through the prim decompositions, against eager."""

from __future__ import annotations

import itertools

import pytest
import torch

from danlu_primtorch.prim_decompositions import prim_decomposition_table

aten = torch.ops.aten
TABLE = prim_decomposition_table()
G = torch.Generator().manual_seed(5)

INPUTS = {
    "float": torch.randn(3, 4, 5, generator=G).transpose(0, 2),
    "int": torch.randint(-4, 5, (3, 4, 5), generator=G, dtype=torch.int32),
    "bool": torch.rand(3, 4, 5, generator=G) > 0.5,
    "0d": torch.tensor(1.5),
    "empty": torch.randn(3, 0, 2, generator=G),
}
DIMS = (None, [], [0], [-1], [0, 2], [2, 0, 1])


def _same(actual, expected):
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True)


def _eager_or_error(op, *args, **kwargs):
    try:
        return op(*args, **kwargs), None
    except (RuntimeError, IndexError, ValueError) as e:
        return None, e


@pytest.mark.parametrize(
    "op",
    [
        aten.sum.dim_IntList,
        aten.amax.default,
        aten.amin.default,
        aten.var.correction,
        aten.any.dims,
        aten.all.dims,
    ],
    ids=str,
)
def test_reduction_dim_conventions(op):
    checked = 0
    for x, dims, keepdim in itertools.product(INPUTS.values(), DIMS, (False, True)):
        if x.dim() == 0 and dims not in (None, [], [0], [-1]):
            continue
        if op is aten.var.correction and not x.dtype.is_floating_point:
            continue
        kwargs = {"keepdim": keepdim}
        if op is aten.var.correction:
            args = (x,)
            kwargs["dim"] = dims
        else:
            args = (x, dims) if dims is not None or op is not aten.amax.default else (x,)
            if dims is None and op in (aten.amax.default, aten.amin.default):
                continue  # amax/amin take a list, never None
        expected, err = _eager_or_error(op, *args, **kwargs)
        if err is not None:
            with pytest.raises((RuntimeError, IndexError, ValueError)):
                TABLE[op](*args, **kwargs)
            continue
        _same(TABLE[op](*args, **kwargs), expected)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("op", [aten.argmax.default, aten.argmin.default], ids=str)
def test_arg_reduction_conventions(op):
    for x in INPUTS.values():
        if x.dtype == torch.bool:
            continue
        for dim, keepdim in itertools.product((None, 0, -1), (False, True)):
            expected, err = _eager_or_error(op, x, dim, keepdim)
            if err is not None:
                with pytest.raises((RuntimeError, IndexError, ValueError)):
                    TABLE[op](x, dim, keepdim)
                continue
            _same(TABLE[op](x, dim, keepdim), expected)


def test_slice_select_and_view_conventions():
    x = INPUTS["float"]
    for dim, start, end, step in itertools.product(
        (0, -1), (None, -100, -2, 1, 7), (None, -1, 2, 100), (1, 2, 3)
    ):
        expected = aten.slice.Tensor(x, dim, start, end, step)
        got = TABLE[aten.slice.Tensor](x, dim, start, end, step)
        assert got.shape == expected.shape and got.stride() == expected.stride()
        assert got.storage_offset() == expected.storage_offset()
    for dim, index in itertools.product((0, 1, -1), (0, -1, 2)):
        _same(TABLE[aten.select.int](x, dim, index), aten.select.int(x, dim, index))
    with pytest.raises(IndexError):
        TABLE[aten.select.int](x, 0, 5)
    c = x.contiguous()
    for size in ([-1], [4, -1], [5, 4, 3], [2, 2, -1, 3]):
        got = TABLE[aten.view.default](c, size)
        assert got.shape == aten.view.default(c, size).shape
    with pytest.raises(RuntimeError):
        TABLE[aten.view.default](c, [7, -1])
    for size in ([-1, 4, 1, 3], [2, 5, 4, 3]):
        expected, err = _eager_or_error(aten.expand.default, torch.randn(4, 1, 3), size)
        if err is None:
            assert TABLE[aten.expand.default](torch.randn(4, 1, 3), size).shape == expected.shape


def test_cumulative_and_sort_conventions():
    for x in INPUTS.values():
        for dim in (0, -1):
            for op in (aten.cumsum.default, aten.cumprod.default):
                expected, err = _eager_or_error(op, x, dim)
                if err is None:
                    _same(TABLE[op](x, dim), expected)
            if x.numel():
                v, i = aten.sort.stable(x, stable=True, dim=dim, descending=True)
                gv, gi = TABLE[aten.sort.stable](x, stable=True, dim=dim, descending=True)
                _same(gv, v)
                _same(gi, i)


OPERANDS = {
    "f32": torch.randn(4, 3, generator=G).t(),
    "bf16": torch.randn(3, 4, generator=G).to(torch.bfloat16),
    "i32": torch.randint(1, 5, (4,), generator=G, dtype=torch.int32),
    "u8": torch.randint(1, 5, (3, 1), generator=G, dtype=torch.uint8),
    "bool": torch.rand(3, 4, generator=G) > 0.5,
    "0d_f64": torch.tensor(1.75, dtype=torch.float64),
    "0d_i64": torch.tensor(3),
    "int": 2,
    "float": 2.5,
    "bool_number": True,
}
BINARY = [
    op
    for op in TABLE
    if op._schema.name.split("::")[1]
    in {
        "add",
        "sub",
        "mul",
        "div",
        "remainder",
        "fmod",
        "pow",
        "atan2",
        "hypot",
        "copysign",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "logical_and",
        "logical_or",
        "logical_xor",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "nextafter",
    }
]


@pytest.mark.parametrize("op", BINARY, ids=str)
def test_binary_promotion_with_numbers_and_zero_dim_tensors(op):
    checked = 0
    kwargs = {"rounding_mode": "floor"} if op is aten.div.Tensor_mode else {}
    for (na, a), (nb, b) in itertools.product(OPERANDS.items(), OPERANDS.items()):
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            continue
        try:
            expected = op(a, b, **kwargs)
        except (RuntimeError, TypeError):
            continue  # this overload or eager rejects the pair
        actual = TABLE[op](a, b, **kwargs)
        assert actual.dtype == expected.dtype, (na, nb, actual.dtype, expected.dtype)
        assert actual.shape == expected.shape, (na, nb)
        low = expected.dtype in (torch.bfloat16, torch.float16)
        torch.testing.assert_close(
            actual, expected, equal_nan=True, **({"rtol": 1e-2, "atol": 1e-2} if low else {})
        )
        checked += 1
    assert checked >= 5, checked


UNARY = [
    op
    for op in TABLE
    if len(op._schema.arguments) == 1
    and op._schema.arguments[0].type.kind() == "TensorType"
    and len(op._schema.returns) == 1
    and op._schema.name.split("::")[1] not in {"alias"}
]


@pytest.mark.parametrize("op", UNARY, ids=str)
def test_unary_ops_over_dtypes(op):
    checked = 0
    for name, x in OPERANDS.items():
        if not isinstance(x, torch.Tensor):
            continue
        x = x.abs() + 0.5 if x.dtype.is_floating_point and "acosh" not in str(op) else x
        try:
            expected = op(x)
        except (RuntimeError, TypeError, NotImplementedError):
            continue
        actual = TABLE[op](x)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, name
        low = expected.dtype in (torch.bfloat16, torch.float16)
        torch.testing.assert_close(
            actual, expected, equal_nan=True, **({"rtol": 1e-2, "atol": 1e-2} if low else {})
        )
        checked += 1
    assert checked >= 1


def test_trunc_division_over_operands():
    for (na, a), (nb, b) in itertools.product(OPERANDS.items(), OPERANDS.items()):
        if not isinstance(a, torch.Tensor):
            continue
        try:
            expected = aten.div.Tensor_mode(a, b, rounding_mode="trunc")
        except (RuntimeError, TypeError):
            continue
        actual = TABLE[aten.div.Tensor_mode](a, b, rounding_mode="trunc")
        assert actual.dtype == expected.dtype, (na, nb)
        low = expected.dtype in (torch.bfloat16, torch.float16)
        torch.testing.assert_close(
            actual, expected, equal_nan=True, **({"rtol": 1e-2, "atol": 1e-2} if low else {})
        )


def test_data_movement_conventions():
    x = torch.randn(4, 5, 6, generator=G).permute(2, 0, 1)  # (6, 4, 5), not contiguous
    cases = [
        (aten.cat.default, ([x, x.to(torch.float64), x[:1].int()], -3), {}),
        (aten.cat.default, ([torch.ones(0), x.bool(), x], 1), {}),
        (aten.constant_pad_nd.default, (x, [2, -1, 0, 3]), {"value": -2}),
        (aten.constant_pad_nd.default, (x.int(), [1, 1]), {"value": 7}),
        (aten.gather.default, (x, -1, torch.randint(0, 5, (6, 4, 2), generator=G)), {}),
        (aten.index_select.default, (x, -2, torch.tensor([3, 0, 3])), {}),
        (aten.index.Tensor, (x, [torch.tensor([-1, 0]), None, torch.tensor([[-2], [1]])]), {}),
        (aten.index.Tensor, (x, [None, None, torch.tensor([4, -5])]), {}),
        (
            aten.index_put.default,
            (
                x,
                [torch.tensor([0, 0, -1]), torch.tensor([1, 1, 2])],
                torch.tensor([[1.0], [2.0], [3.0]]),
                True,
            ),
            {},
        ),
        (
            aten.index_put.default,
            (x.int(), [None, torch.tensor([2])], torch.tensor(9, dtype=torch.int32)),
            {},
        ),
        (
            aten.scatter_reduce.two,
            (
                x,
                0,
                torch.randint(0, 6, (3, 4, 5), generator=G),
                torch.randn(3, 4, 5, generator=G),
                "mean",
            ),
            {"include_self": True},
        ),
        (
            aten.scatter_add.default,
            (
                x.double(),
                -1,
                torch.randint(0, 5, (6, 4, 9), generator=G),
                torch.randn(6, 4, 9, generator=G, dtype=torch.float64),
            ),
            {},
        ),
    ]
    for op, args, kwargs in cases:
        expected = op(*args, **kwargs)
        actual = TABLE[op](*args, **kwargs)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, op
        torch.testing.assert_close(actual, expected)
        sig = [(n, s) for n, s in zip(expected.shape, expected.stride()) if n > 1]
        assert sig == [(n, s) for n, s in zip(actual.shape, actual.stride()) if n > 1], op


def test_creation_conventions():
    cases = [
        (aten.full.default, ([2, 0, 3], False), {}),
        (aten.full.default, ([3], 2), {"dtype": torch.float64}),
        (aten.arange.start_step, (0.1, 1.0, 0.1), {}),
        (aten.arange.start_step, (5, -5, -1.5), {"dtype": torch.int64}),
        (aten.arange.start_step, (0, 0), {}),
        (aten.arange.start_step, (1, 2.5, 0.5), {"dtype": torch.uint8}),
        (aten.arange.start_step, (-3, 4.5, 1.25), {"dtype": torch.int16}),
        (aten.arange.start_step, (0, 1, 0.1), {"dtype": torch.bfloat16}),
        (aten.scalar_tensor.default, (True,), {}),
    ]
    for op, args, kwargs in cases:
        expected = op(*args, **kwargs)
        actual = TABLE[op](*args, **kwargs)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (op, args)
        torch.testing.assert_close(actual, expected)
