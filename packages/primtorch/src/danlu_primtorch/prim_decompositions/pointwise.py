"""Pointwise canonical ops -> elementwise prims, with promotion and broadcasting explicit."""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import (
    P,
    broadcast_shapes,
    common_device,
    convert,
    elementwise,
    full_like_shape,
    operand,
    shape_of,
)
from danlu_primtorch.prim_decompositions.registry import register
from danlu_primtorch.type_promotion import Promotion, category, elementwise_dtypes

aten = torch.ops.aten

# --- unary math: int -> float, float16/bfloat16 computed in float32 ------------------------------

_FLOAT_UNARY = {
    aten.exp.default: P.exp,
    aten.exp2.default: P.exp2,
    aten.expm1.default: P.expm1,
    aten.log.default: P.log,
    aten.log2.default: P.log2,
    aten.log10.default: P.log10,
    aten.log1p.default: P.log1p,
    aten.sqrt.default: P.sqrt,
    aten.rsqrt.default: P.rsqrt,
    aten.sin.default: P.sin,
    aten.cos.default: P.cos,
    aten.tan.default: P.tan,
    aten.asin.default: P.asin,
    aten.acos.default: P.acos,
    aten.atan.default: P.atan,
    aten.sinh.default: P.sinh,
    aten.cosh.default: P.cosh,
    aten.tanh.default: P.tanh,
    aten.asinh.default: P.asinh,
    aten.acosh.default: P.acosh,
    aten.atanh.default: P.atanh,
    aten.erf.default: P.erf,
    aten.erfc.default: P.erfc,
    aten.erfinv.default: P.erfinv,
    aten.lgamma.default: P.lgamma,
    aten.digamma.default: P.digamma,
    aten.i0.default: P.i0,
    aten.reciprocal.default: P.reciprocal,
}


def _float_unary(prim):
    def decomp(a):
        return elementwise(prim, a, promotion=Promotion.INT_TO_FLOAT)

    decomp.__name__ = f"{prim.__name__.split('.')[-1]}_to_prims"
    return decomp


for _op, _prim in _FLOAT_UNARY.items():
    register(_op)(_float_unary(_prim))


@register(aten.sigmoid.default)
def sigmoid(a):
    def prim(x):
        one = full_like_shape(x, 1.0)
        return P.reciprocal(P.add(one, P.exp(P.neg(x))))

    return elementwise(prim, a, promotion=Promotion.INT_TO_FLOAT)


# --- unary ops that keep the dtype -------------------------------------------------------------


@register(aten.abs.default)
def abs_(a):
    if a.dtype == torch.bool:
        return P.convert_element_type(a, torch.bool)
    return elementwise(P.abs, a, opmath=False)


@register(aten.neg.default)
def neg(a):
    return elementwise(P.neg, a, opmath=False)


@register(aten.sign.default, aten.sgn.default)
def sign(a):
    return elementwise(P.sign, a, opmath=False)


@register(aten.signbit.default)
def signbit(a):
    if a.dtype == torch.bool:
        return P.ne(a, a)  # all False, in a's layout
    return P.signbit(a)


def _rounding(prim):
    def decomp(a):
        if category(a.dtype) <= 1:  # integers are already integral: a copy
            return P.convert_element_type(a, a.dtype)
        return elementwise(prim, a, opmath=False)

    return decomp


register(aten.floor.default)(_rounding(P.floor))
register(aten.ceil.default)(_rounding(P.ceil))
register(aten.trunc.default)(_rounding(P.trunc))
register(aten.round.default)(_rounding(P.round))


@register(aten.round.decimals)
def round_decimals(a, *, decimals=0):
    if decimals == 0:
        return _rounding(P.round)(a)
    if category(a.dtype) <= 1:
        raise RuntimeError("round with decimals is not implemented for integer tensors")

    def prim(x):
        scale = full_like_shape(x, 10.0 ** abs(decimals))
        if decimals > 0:
            return P.div(P.round(P.mul(x, scale)), scale)
        return P.mul(P.round(P.div(x, scale)), scale)

    return elementwise(prim, a)


@register(aten.bitwise_not.default)
def bitwise_not(a):
    return P.bitwise_not(a)


@register(aten.logical_not.default)
def logical_not(a):
    return P.eq(a, full_like_shape(a, 0))


def _float_class(prim):
    def decomp(a):
        if not a.dtype.is_floating_point:
            return P.ne(a, a)  # never NaN/inf: all False in a's layout
        return prim(a)

    return decomp


register(aten.isnan.default)(_float_class(P.isnan))
register(aten.isinf.default)(_float_class(P.isinf))

# --- binary arithmetic ---------------------------------------------------------------------------


def _add_like(prim, a, b, alpha):
    """prim(a, b * alpha) in the promoted dtype of (a, b): alpha never widens the result."""
    compute, result = elementwise_dtypes(a, b)
    if category(result) <= 1 and isinstance(alpha, float):
        raise RuntimeError("for integral inputs, alpha must not be a floating point number")
    shape = broadcast_shapes(shape_of(a), shape_of(b))
    device = common_device(a, b)
    x, y = operand(a, compute, shape, device), operand(b, compute, shape, device)
    if not (alpha == 1 and not isinstance(alpha, bool)):
        y = P.mul(y, operand(alpha, compute, shape, device))
    return convert(prim(x, y), result)


@register(aten.add.Tensor)
def add(a, b, *, alpha=1):
    return _add_like(P.add, a, b, alpha)


@register(aten.sub.Tensor)
def sub(a, b, *, alpha=1):
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("subtraction of two bool tensors is not supported; use ~ or ^")
    return _add_like(P.sub, a, b, alpha)


def _is_bool(x):
    return (isinstance(x, torch.Tensor) and x.dtype == torch.bool) or isinstance(x, bool)


@register(aten.mul.Tensor)
def mul(a, b):
    return elementwise(P.mul, a, b)


@register(aten.div.Tensor)
def div(a, b):
    return elementwise(P.div, a, b, promotion=Promotion.INT_TO_FLOAT)


@register(aten.div.Tensor_mode)
def div_mode(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return div(a, b)
    if rounding_mode == "trunc":
        return elementwise(_trunc_div, a, b)
    if rounding_mode == "floor":
        return elementwise(_floor_div, a, b)
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


def _trunc_div(x, y):
    if x.dtype.is_floating_point:
        return P.trunc(P.div(x, y))
    return P.div(x, y)  # integer prim div truncates


def _floor_div(x, y):
    if not x.dtype.is_floating_point:
        q = P.div(x, y)
        r = P.fmod(x, y)
        zero = full_like_shape(x, 0)
        fix = P.bitwise_and(P.ne(r, zero), P.ne(P.lt(r, zero), P.lt(y, zero)))
        return P.sub(q, P.convert_element_type(fix, x.dtype))
    # Python's floor division on floats, as eager computes it (exact for representable
    # quotients, -0.0 kept for zero results)
    zero = full_like_shape(x, 0.0)
    one = full_like_shape(x, 1.0)
    half = full_like_shape(x, 0.5)
    mod = P.fmod(x, y)
    q = P.div(P.sub(x, mod), y)
    fix = P.bitwise_and(P.ne(mod, zero), P.ne(P.lt(y, zero), P.lt(mod, zero)))
    q = P.where(fix, P.sub(q, one), q)
    fq = P.floor(q)
    fq = P.where(P.gt(P.sub(q, fq), half), P.add(fq, one), fq)
    true_q = P.div(x, y)
    fq = P.where(P.eq(q, zero), P.copysign(zero, true_q), fq)
    # y == 0: the true quotient (inf/nan), as eager
    return P.where(P.eq(y, zero), true_q, fq)


@register(aten.remainder.Tensor)
def remainder(a, b):
    return elementwise(P.remainder, a, b)


@register(aten.fmod.Tensor)
def fmod(a, b):
    return elementwise(P.fmod, a, b)


@register(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def pow_(a, b):
    if isinstance(a, torch.Tensor) and a.dtype == torch.bool and isinstance(b, bool):
        # eager's one bool case: x ** True == x, x ** False == True
        return P.convert_element_type(
            elementwise(P.pow, P.convert_element_type(a, torch.int64), int(b)), torch.bool
        )
    return elementwise(P.pow, a, b)


@register(aten.atan2.default)
def atan2(a, b):
    return elementwise(P.atan2, a, b, promotion=Promotion.INT_TO_FLOAT)


@register(aten.hypot.default)
def hypot(a, b):
    # max * sqrt(1 + (min/max)^2): no overflow of a*a for large inputs; inf wins over NaN
    def prim(x, y):
        ax, ay = P.abs(x), P.abs(y)
        hi, lo = P.maximum(ax, ay), P.minimum(ax, ay)
        zero, one = full_like_shape(x, 0.0), full_like_shape(x, 1.0)
        ratio = P.where(P.eq(hi, zero), zero, P.div(lo, hi))
        out = P.mul(hi, P.sqrt(P.add(one, P.mul(ratio, ratio))))
        inf = full_like_shape(x, float("inf"))
        return P.where(P.bitwise_or(P.isinf(ax), P.isinf(ay)), inf, out)

    return elementwise(prim, a, b)


@register(aten.copysign.Tensor)
def copysign(a, b):
    return elementwise(P.copysign, a, b, promotion=Promotion.INT_TO_FLOAT)


@register(aten.nextafter.default)
def nextafter(a, b):
    return elementwise(P.nextafter, a, b, opmath=False)


@register(aten.maximum.default)
def maximum(a, b):
    return elementwise(P.maximum, a, b, opmath=False)


@register(aten.minimum.default)
def minimum(a, b):
    return elementwise(P.minimum, a, b, opmath=False)


def _nan_ignoring(prim):
    def decomp(a, b):
        def body(x, y):
            if not x.dtype.is_floating_point:
                return prim(x, y)
            return P.where(P.isnan(y), x, P.where(P.isnan(x), y, prim(x, y)))

        return elementwise(body, a, b, opmath=False)

    return decomp


register(aten.fmax.default)(_nan_ignoring(P.maximum))
register(aten.fmin.default)(_nan_ignoring(P.minimum))

# --- bitwise and logical -------------------------------------------------------------------------

for _op, _prim in (
    (aten.bitwise_and.Tensor, P.bitwise_and),
    (aten.bitwise_or.Tensor, P.bitwise_or),
    (aten.bitwise_xor.Tensor, P.bitwise_xor),
    (aten.bitwise_left_shift.Tensor, P.shift_left),
    (aten.bitwise_right_shift.Tensor, P.shift_right_arithmetic),
):
    register(_op)(lambda a, b, _p=_prim: elementwise(_p, a, b, opmath=False))


def _truth(x, shape, device):
    """x != 0 as a bool tensor of shape."""
    if isinstance(x, torch.Tensor):
        t = operand(x, x.dtype, shape, device)
        return t if t.dtype == torch.bool else P.ne(t, full_like_shape(t, 0))
    return operand(bool(x), torch.bool, shape, device)


def _logical(prim):
    def decomp(a, b):
        shape = broadcast_shapes(shape_of(a), shape_of(b))
        device = common_device(a, b)
        return prim(_truth(a, shape, device), _truth(b, shape, device))

    return decomp


register(aten.logical_and.default)(_logical(P.bitwise_and))
register(aten.logical_or.default)(_logical(P.bitwise_or))
register(aten.logical_xor.default)(_logical(P.bitwise_xor))

# --- comparisons: compared in the promoted dtype, bool result ------------------------------------


def _comparison(prim):
    def decomp(a, b):
        return elementwise(prim, a, b, promotion=Promotion.ALWAYS_BOOL, opmath=False)

    return decomp


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _packet = getattr(aten, _name)
    register(_packet.Tensor, _packet.Scalar)(_comparison(getattr(P, _name)))

# --- selection ----------------------------------------------------------------------------------


@register(aten.where.self)
def where(condition, a, b):
    if condition.dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(f"where expected a bool condition, got {condition.dtype}")
    _, dtype = elementwise_dtypes(a, b)
    shape = broadcast_shapes(shape_of(condition), shape_of(a), shape_of(b))
    device = common_device(condition, a, b)
    pred = operand(condition, torch.bool, shape, device)
    return P.where(pred, operand(a, dtype, shape, device), operand(b, dtype, shape, device))
