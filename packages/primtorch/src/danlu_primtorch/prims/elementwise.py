"""Elementwise prims: one output element per input element, operands of one shape and dtype.

No broadcasting and no type promotion happen here (``broadcast_in_dim`` and
``convert_element_type`` do that, in the decompositions). Outputs are dense and follow the
memory order of the inputs (see ``strides.elementwise_strides``). Complex dtypes are not part of
the prim set yet.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import dtype_in, fail, same_shape_dtype_device
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import elementwise_strides, like_strides

FLOAT = "float"
INT_FLOAT = "int|float"
ALL = "bool|int|float"
BITS = "bool|int"


def _out(inputs, dtype):
    a = inputs[0]
    strides = elementwise_strides(a.shape, [t.stride() for t in inputs])
    return torch.empty_strided(a.shape, strides, dtype=dtype, device=a.device)


def _make_meta(name: str, arity: int, allowed: str, out_dtype: torch.dtype | None):
    def meta(*args):
        tensors = args[:arity]
        same_shape_dtype_device(name, *tensors)
        dtype_in(name, tensors[0], allowed)
        return _out(tensors, out_dtype or tensors[0].dtype)

    meta.__name__ = f"{name}_meta"
    return meta


def _make_impl(name: str, fn, allowed: str):
    """The eager reference, behind the same contract checks as the meta function."""

    def impl(*tensors):
        same_shape_dtype_device(name, *tensors)
        dtype_in(name, tensors[0], allowed)
        return fn(*tensors)

    impl.__name__ = f"{name}_impl"
    return impl


# name -> (eager reference, allowed dtypes, fixed output dtype or None, semantics)
UNARY = {
    "abs": (torch.abs, INT_FLOAT, None, "|a|."),
    "neg": (torch.neg, INT_FLOAT, None, "-a (integers wrap around)."),
    "sign": (torch.sign, ALL, None, "-1, 0 or 1 by the sign of a; NaN stays NaN; -0.0 gives 0."),
    "signbit": (
        torch.signbit,
        INT_FLOAT,
        torch.bool,
        "True where the sign bit is set (incl. -0.0).",
    ),
    "reciprocal": (torch.reciprocal, FLOAT, None, "1 / a, IEEE."),
    "sqrt": (torch.sqrt, FLOAT, None, "Square root; NaN for a < 0."),
    "rsqrt": (torch.rsqrt, FLOAT, None, "1 / sqrt(a)."),
    "exp": (torch.exp, FLOAT, None, "e ** a."),
    "exp2": (torch.exp2, FLOAT, None, "2 ** a."),
    "expm1": (torch.expm1, FLOAT, None, "e ** a - 1, accurate near 0."),
    "log": (torch.log, FLOAT, None, "Natural logarithm; -inf at 0, NaN below."),
    "log1p": (torch.log1p, FLOAT, None, "log(1 + a), accurate near 0."),
    "log2": (torch.log2, FLOAT, None, "Base-2 logarithm."),
    "log10": (torch.log10, FLOAT, None, "Base-10 logarithm."),
    "sin": (torch.sin, FLOAT, None, "Sine (radians)."),
    "cos": (torch.cos, FLOAT, None, "Cosine (radians)."),
    "tan": (torch.tan, FLOAT, None, "Tangent (radians)."),
    "asin": (torch.asin, FLOAT, None, "Arc sine; NaN outside [-1, 1]."),
    "acos": (torch.acos, FLOAT, None, "Arc cosine; NaN outside [-1, 1]."),
    "atan": (torch.atan, FLOAT, None, "Arc tangent."),
    "sinh": (torch.sinh, FLOAT, None, "Hyperbolic sine."),
    "cosh": (torch.cosh, FLOAT, None, "Hyperbolic cosine."),
    "tanh": (torch.tanh, FLOAT, None, "Hyperbolic tangent."),
    "asinh": (torch.asinh, FLOAT, None, "Inverse hyperbolic sine."),
    "acosh": (torch.acosh, FLOAT, None, "Inverse hyperbolic cosine; NaN below 1."),
    "atanh": (torch.atanh, FLOAT, None, "Inverse hyperbolic tangent; NaN outside [-1, 1]."),
    "erf": (torch.erf, FLOAT, None, "Gauss error function."),
    "erfc": (torch.erfc, FLOAT, None, "1 - erf(a), accurate for large a."),
    "erfinv": (torch.erfinv, FLOAT, None, "Inverse of erf on (-1, 1); +-inf at +-1, NaN outside."),
    "lgamma": (torch.lgamma, FLOAT, None, "log(|Gamma(a)|)."),
    "digamma": (
        torch.digamma,
        FLOAT,
        None,
        "d/da log(Gamma(a)); -inf at +0, +inf at -0, NaN at negative integers.",
    ),
    "i0": (torch.i0, FLOAT, None, "Modified Bessel function of the first kind, order 0."),
    "floor": (torch.floor, FLOAT, None, "Largest integral value <= a."),
    "ceil": (torch.ceil, FLOAT, None, "Smallest integral value >= a."),
    "round": (torch.round, FLOAT, None, "Nearest integral value, ties to even."),
    "trunc": (torch.trunc, FLOAT, None, "Integral part, rounding toward zero."),
    "isnan": (torch.isnan, FLOAT, torch.bool, "True where a is NaN."),
    "isinf": (torch.isinf, FLOAT, torch.bool, "True where a is +inf or -inf."),
    "isfinite": (torch.isfinite, FLOAT, torch.bool, "True where a is neither NaN nor infinite."),
    "bitwise_not": (torch.bitwise_not, BITS, None, "~a; logical not for bool."),
}


def _int_div(a, b):
    return torch.div(a, b, rounding_mode="trunc")


def _div(a, b):
    if a.dtype.is_floating_point:
        return torch.div(a, b)
    return _int_div(a, b)


BINARY = {
    "add": (torch.add, ALL, None, "a + b (integers wrap around; bool: logical or)."),
    "sub": (torch.sub, INT_FLOAT, None, "a - b (integers wrap around)."),
    "mul": (torch.mul, ALL, None, "a * b (integers wrap around; bool: logical and)."),
    "div": (
        _div,
        INT_FLOAT,
        None,
        "a / b: IEEE true division for floats; for integers C division truncating toward zero "
        "(division by zero is an error on CPU).",
    ),
    "remainder": (
        torch.remainder,
        INT_FLOAT,
        None,
        "a - floor(a / b) * b: result has the sign of b (Python %).",
    ),
    "fmod": (torch.fmod, INT_FLOAT, None, "C fmod: a - trunc(a / b) * b, sign of a."),
    "pow": (
        torch.pow,
        INT_FLOAT,
        None,
        "a ** b; for integers b must be >= 0 (eager raises otherwise).",
    ),
    "maximum": (torch.maximum, ALL, None, "Elementwise max; NaN if either is NaN."),
    "minimum": (torch.minimum, ALL, None, "Elementwise min; NaN if either is NaN."),
    "atan2": (torch.atan2, FLOAT, None, "Angle of the point (b, a), in (-pi, pi]."),
    "copysign": (torch.copysign, FLOAT, None, "|a| with the sign bit of b."),
    "nextafter": (torch.nextafter, FLOAT, None, "Next representable value after a toward b."),
    "eq": (torch.eq, ALL, torch.bool, "a == b (NaN != NaN)."),
    "ne": (torch.ne, ALL, torch.bool, "a != b."),
    "lt": (torch.lt, ALL, torch.bool, "a < b."),
    "le": (torch.le, ALL, torch.bool, "a <= b."),
    "gt": (torch.gt, ALL, torch.bool, "a > b."),
    "ge": (torch.ge, ALL, torch.bool, "a >= b."),
    "bitwise_and": (torch.bitwise_and, BITS, None, "a & b; logical and for bool."),
    "bitwise_or": (torch.bitwise_or, BITS, None, "a | b; logical or for bool."),
    "bitwise_xor": (torch.bitwise_xor, BITS, None, "a ^ b; logical xor for bool."),
    "shift_left": (
        torch.bitwise_left_shift,
        "int",
        None,
        "a << b; shifts >= the bit width give 0 (as eager).",
    ),
    "shift_right_arithmetic": (
        torch.bitwise_right_shift,
        "int",
        None,
        "a >> b, sign-extending for signed types; shifts >= the bit width give 0 or -1.",
    ),
}


def _define_all() -> dict[str, torch._ops.OpOverload]:
    ops = {}
    for name, (fn, allowed, out_dtype, sem) in UNARY.items():
        doc = (
            f"{sem}\n\nUnary elementwise prim on {allowed.replace('|', '/')} tensors; "
            f"result dtype {out_dtype or 'is the input dtype'}; dense output in the input's "
            "memory order."
        )
        ops[name] = define_prim(
            f"{name}(Tensor a) -> Tensor",
            PrimKind.ELEMENTWISE,
            meta=_make_meta(name, 1, allowed, out_dtype),
            impl=_make_impl(name, fn, allowed),
            doc=doc,
        )
    for name, (fn, allowed, out_dtype, sem) in BINARY.items():
        doc = (
            f"{sem}\n\nBinary elementwise prim on {allowed.replace('|', '/')} tensors of one "
            f"shape and dtype; result dtype {out_dtype or 'is the operand dtype'}; dense output "
            "in the operands' memory order."
        )
        ops[name] = define_prim(
            f"{name}(Tensor a, Tensor b) -> Tensor",
            PrimKind.ELEMENTWISE,
            meta=_make_meta(name, 2, allowed, out_dtype),
            impl=_make_impl(name, fn, allowed),
            doc=doc,
        )
    return ops


OPS = _define_all()


def _where_check(pred, a, b):
    same_shape_dtype_device("where", a, b)
    same_shape_dtype_device("where", pred, a, check_dtype=False)
    if pred.dtype != torch.bool:
        fail("where", f"pred must be bool, got {pred.dtype}")


def _where_meta(pred, a, b):
    _where_check(pred, a, b)
    return _out([pred, a, b], a.dtype)


OPS["where"] = define_prim(
    "where(Tensor pred, Tensor a, Tensor b) -> Tensor",
    PrimKind.ELEMENTWISE,
    meta=_where_meta,
    impl=lambda pred, a, b: (_where_check(pred, a, b), torch.where(pred, a, b))[1],
    doc="a where pred else b.\n\npred is bool; pred, a and b share one shape; a and b share one "
    "dtype. Dense output in the memory order of (pred, a, b).",
)


def _convert_meta(a, dtype):
    if a.dtype.is_complex or dtype.is_complex:
        fail("convert_element_type", "complex dtypes are not supported")
    return torch.empty_strided(
        a.shape, like_strides(a.shape, a.stride()), dtype=dtype, device=a.device
    )


def _convert_impl(a, dtype):
    if a.dtype.is_complex or dtype.is_complex:
        fail("convert_element_type", "complex dtypes are not supported")
    out = torch.empty_like(a, dtype=dtype)
    out.copy_(a)
    return out


OPS["convert_element_type"] = define_prim(
    "convert_element_type(Tensor a, ScalarType dtype) -> Tensor",
    PrimKind.ELEMENTWISE,
    meta=_convert_meta,
    impl=_convert_impl,
    doc="a converted to dtype, elementwise, always a new tensor.\n\n"
    "float->int truncates toward zero (NaN/out-of-range values are implementation-defined); "
    "anything->bool is a != 0; bool->number is 0/1; float narrowing rounds to nearest even. "
    "Strides as empty_like(a): a's own if dense, else dense in a's memory order.",
)
