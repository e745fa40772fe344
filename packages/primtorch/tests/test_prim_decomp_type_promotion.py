"""Our type-promotion module against torch's own answers (torch.result_type and real ops)."""

from __future__ import annotations

import itertools

import pytest
import torch

from danlu_primtorch.type_promotion import (
    Promotion,
    computation_dtype,
    elementwise_dtypes,
    promote_types,
    result_type,
)

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
NUMBERS = (True, 3, -2, 2.5)


def test_promote_types_matches_torch_lattice():
    lattice = (*DTYPES, torch.complex64, torch.complex128)
    for a, b in itertools.product(lattice, lattice):
        assert promote_types(a, b) == torch.promote_types(a, b), (a, b)


def _operands(dtype):
    yield torch.zeros(2, dtype=dtype)
    yield torch.zeros((), dtype=dtype)


@pytest.mark.parametrize("d1", DTYPES)
def test_result_type_matches_torch_for_tensor_pairs(d1):
    for d2 in DTYPES:
        for a, b in itertools.product(_operands(d1), _operands(d2)):
            assert result_type(a, b) == torch.result_type(a, b), (
                a.dtype,
                a.dim(),
                b.dtype,
                b.dim(),
            )


@pytest.mark.parametrize("dtype", DTYPES)
def test_result_type_matches_torch_for_python_numbers(dtype):
    for t in _operands(dtype):
        for n in NUMBERS:
            assert result_type(t, n) == torch.result_type(t, n), (dtype, t.dim(), n)
            assert result_type(n, t) == torch.result_type(n, t)


def test_three_operand_promotion_matches_where():
    c = torch.ones(2, dtype=torch.bool)
    for d1, d2 in itertools.product(DTYPES, DTYPES):
        a, b = torch.zeros(2, dtype=d1), torch.zeros((), dtype=d2)
        assert result_type(a, b) == torch.where(c, a, b).dtype


def test_default_dtype_is_respected():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert result_type(torch.zeros(2, dtype=torch.int32), 1.5) == torch.float64
        assert (
            elementwise_dtypes(torch.zeros(2, dtype=torch.int32), promotion=Promotion.INT_TO_FLOAT)[
                1
            ]
            == torch.float64
        )
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize(
    ("fn", "promotion"),
    [
        (torch.div, Promotion.INT_TO_FLOAT),
        (torch.atan2, Promotion.INT_TO_FLOAT),
        (torch.add, Promotion.DEFAULT),
        (torch.lt, Promotion.ALWAYS_BOOL),
        (torch.maximum, Promotion.DEFAULT),
    ],
)
def test_elementwise_result_dtype_matches_eager_ops(fn, promotion):
    for d1, d2 in itertools.product(DTYPES, DTYPES):
        a, b = torch.ones(2, dtype=d1), torch.ones(2, dtype=d2)
        try:
            expected = fn(a, b).dtype
        except RuntimeError:  # eager rejects the pair (e.g. atan2 of bools): nothing to compare
            continue
        assert elementwise_dtypes(a, b, promotion=promotion)[1] == expected, (fn, d1, d2)


def test_computation_dtype_lifts_low_precision_only():
    assert computation_dtype(torch.bfloat16) == torch.float32
    assert computation_dtype(torch.float16) == torch.float32
    assert computation_dtype(torch.float64) == torch.float64
    assert computation_dtype(torch.int32) == torch.int32
    assert elementwise_dtypes(torch.ones(2, dtype=torch.bfloat16), 1.0) == (
        torch.float32,
        torch.bfloat16,
    )


def test_bad_operands_are_rejected():
    with pytest.raises(TypeError):
        result_type(torch.ones(2), "x")
    with pytest.raises(ValueError):
        result_type()
