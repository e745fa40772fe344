"""torch's type promotion, written out: which dtype an op computes in and which it returns.

Operands are tensors or Python numbers (``bool``/``int``/``float``, or SymInt/SymFloat/SymBool).
The rules (torch's, see "Type promotion" in the torch docs):

* dtypes rank by category: bool < integer < floating < complex;
* three priority groups: tensors with dims, zero-dim tensors, Python numbers. A lower group only
  matters when its category is higher than every higher group's; then it contributes its
  category, not its width: a Python float lifts an int tensor to the *default* float dtype,
  a float64 zero-dim tensor does not widen a float32 tensor;
* Python numbers are bool, int64, the default float dtype, or the default complex dtype.

On top of the result dtype, :func:`elementwise_dtypes` applies the op's rule (``int->float``
for true division and transcendental functions, ``always bool`` for comparisons, ...) and picks
the *computation* dtype: float16/bfloat16 are computed in float32 and rounded once at the end,
as eager does on CPU and GPU.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import torch

_CATEGORY_BOOL, _CATEGORY_INT, _CATEGORY_FLOAT, _CATEGORY_COMPLEX = range(4)

LOW_PRECISION_FLOATS = (torch.float16, torch.bfloat16)


def category(dtype: torch.dtype) -> int:
    if dtype == torch.bool:
        return _CATEGORY_BOOL
    if dtype.is_complex:
        return _CATEGORY_COMPLEX
    if dtype.is_floating_point:
        return _CATEGORY_FLOAT
    return _CATEGORY_INT


_SIGNED_INTS = (torch.int8, torch.int16, torch.int32, torch.int64)
_FLOAT_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}
_COMPLEX_OF_RANK = {1: torch.complex32, 2: torch.complex64, 3: torch.complex128}
_COMPLEX_RANK = {torch.complex32: 1, torch.complex64: 2, torch.complex128: 3}


def promote_types(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The smallest dtype both a and b convert to without losing their category (torch's
    lattice: bool < uint8/int8 < ... < int64 < float16/bfloat16 < float32 < float64, complex
    above; uint8 with a signed int needs the next signed width; float16 with bfloat16 is
    float32). Pure Python: it never dispatches, so tracing records nothing for it."""
    if a == b:
        return a
    if a == torch.bool:
        return b
    if b == torch.bool:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if category(hi) == _CATEGORY_COMPLEX and category(lo) == _CATEGORY_FLOAT:
            rank = max(_COMPLEX_RANK[hi], _FLOAT_RANK.get(lo, 0))
            return _COMPLEX_OF_RANK[rank]
        if hi in _FLOAT_RANK or hi in _COMPLEX_RANK:
            return hi
        raise TypeError(f"no promotion rule for {a} and {b}")
    if ca == _CATEGORY_INT:
        if a == torch.uint8 or b == torch.uint8:
            other = b if a == torch.uint8 else a
            if other not in _SIGNED_INTS:
                raise TypeError(f"no promotion rule for {a} and {b}")
            return torch.int16 if other == torch.int8 else other
        if a in _SIGNED_INTS and b in _SIGNED_INTS:
            return max(a, b, key=_SIGNED_INTS.index)
        raise TypeError(f"no promotion rule for {a} and {b}")
    if ca == _CATEGORY_FLOAT:
        if a not in _FLOAT_RANK or b not in _FLOAT_RANK:
            raise TypeError(f"no promotion rule for {a} and {b}")
        if {a, b} == {torch.float16, torch.bfloat16}:
            return torch.float32
        return max(a, b, key=_FLOAT_RANK.__getitem__)
    return _COMPLEX_OF_RANK[max(_COMPLEX_RANK[a], _COMPLEX_RANK[b])]


def is_number(x: object) -> bool:
    return isinstance(x, (bool, int, float, complex, torch.SymInt, torch.SymFloat, torch.SymBool))


def number_dtype(x: object) -> torch.dtype:
    """The dtype a Python number stands for in promotion."""
    if isinstance(x, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(x, (int, torch.SymInt)):
        return torch.int64
    if isinstance(x, (float, torch.SymFloat)):
        return torch.get_default_dtype()
    if isinstance(x, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    raise TypeError(f"not a number: {x!r}")


def _combine(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    """Merge a lower-priority group's dtype into a higher one (category wins, width does not)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if category(higher) >= category(lower):
        return higher
    # the lower group has a higher category
    if category(lower) == _CATEGORY_COMPLEX and category(higher) == _CATEGORY_FLOAT:
        return (
            torch.complex128
            if higher == torch.float64
            else (torch.complex32 if higher == torch.float16 else torch.complex64)
        )
    if category(lower) == _CATEGORY_FLOAT and category(higher) == _CATEGORY_INT:
        # a zero-dim / Python float lifts ints to its own (zero-dim) or default (number) dtype
        return lower
    if category(higher) == _CATEGORY_BOOL:
        return lower
    return lower


def result_type(*operands: object) -> torch.dtype:
    """The dtype torch would give ``op(*operands)`` for an ordinary (DEFAULT) elementwise op."""
    dim_result: torch.dtype | None = None
    zero_dim_result: torch.dtype | None = None
    number_result: torch.dtype | None = None
    for x in operands:
        if x is None:
            continue
        if isinstance(x, torch.Tensor):
            if x.dim() > 0:
                dim_result = x.dtype if dim_result is None else promote_types(dim_result, x.dtype)
            else:
                zero_dim_result = (
                    x.dtype if zero_dim_result is None else promote_types(zero_dim_result, x.dtype)
                )
        elif is_number(x):
            d = number_dtype(x)
            number_result = d if number_result is None else promote_types(number_result, d)
        else:
            raise TypeError(f"result_type: unexpected operand {x!r}")
    if dim_result is None and zero_dim_result is None and number_result is None:
        raise ValueError("result_type needs at least one operand")
    return _combine(dim_result, _combine(zero_dim_result, number_result))


def computation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype an elementwise op computes in: float32 for float16/bfloat16, else dtype."""
    return torch.float32 if dtype in LOW_PRECISION_FLOATS else dtype


def complex_to_real(dtype: torch.dtype) -> torch.dtype:
    return {
        torch.complex32: torch.float16,
        torch.complex64: torch.float32,
        torch.complex128: torch.float64,
    }.get(dtype, dtype)


class Promotion(enum.Enum):
    """How an elementwise op turns the promoted dtype into its result dtype."""

    DEFAULT = "default"  # result = promoted dtype (add, mul, maximum, where's values, ...)
    INT_TO_FLOAT = "int_to_float"  # bool/int -> default float (true div, sin, exp, sqrt, ...)
    ALWAYS_BOOL = "always_bool"  # comparisons, isnan, logical ops
    COMPLEX_TO_FLOAT = "complex_to_float"  # abs: complex -> its real dtype
    BOOL_TO_LONG = "bool_to_long"  # bool -> int64, otherwise as DEFAULT (e.g. pow's base rule)


def elementwise_dtypes(
    *operands: object, promotion: Promotion = Promotion.DEFAULT
) -> tuple[torch.dtype, torch.dtype]:
    """``(computation_dtype, result_dtype)`` for an elementwise op on ``operands``."""
    promoted = result_type(*operands)
    if promotion is Promotion.ALWAYS_BOOL:
        return computation_dtype(promoted), torch.bool
    if promotion is Promotion.INT_TO_FLOAT:
        if category(promoted) <= _CATEGORY_INT:
            promoted = torch.get_default_dtype()
        return computation_dtype(promoted), promoted
    if promotion is Promotion.COMPLEX_TO_FLOAT:
        return computation_dtype(complex_to_real(promoted)), complex_to_real(promoted)
    if promotion is Promotion.BOOL_TO_LONG:
        if promoted == torch.bool:
            promoted = torch.int64
        return computation_dtype(promoted), promoted
    return computation_dtype(promoted), promoted


def reduction_dtype(dtype: torch.dtype, *, integers_to_long: bool) -> torch.dtype:
    """Result dtype of sum/prod-like reductions: bool and integers accumulate as int64."""
    if integers_to_long and category(dtype) <= _CATEGORY_INT:
        return torch.int64
    return dtype


def tensors_of(values: Iterable[object]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]
