"""Pointwise ATen ops -> Pointwise loops, with torch's type promotion made explicit."""

from __future__ import annotations

import math

import torch

from danlu_inductor.ir.nodes import Pointwise, StorageBox
from danlu_inductor.ir.ops import ops
from danlu_inductor.lowering.registry import (
    NotLowered,
    aten,
    compute_dtype,
    is_node,
    make_pointwise,
    register,
    result_type,
    to_dtype,
)


def _float_of(dtype):
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _check_real(*args):
    for a in args:
        if isinstance(a, complex) or (is_node(a) and a.get_dtype().is_complex):
            raise NotLowered("complex values")


def _unary(target, name, int_to_float=False, int_identity=False, bool_out=False):
    @register(target)
    def lower(x):
        _check_real(x)
        dtype = x.get_dtype()
        if int_identity and not dtype.is_floating_point:
            return x
        if bool_out:
            return make_pointwise([x], getattr(ops, name), torch.bool, compute_dtype(dtype))
        out = _float_of(dtype) if int_to_float else dtype
        return make_pointwise([x], getattr(ops, name), out)

    return lower


for _name in (
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erf erfc lgamma sigmoid reciprocal"
).split():
    _unary(getattr(aten, _name).default, _name, int_to_float=True)
for _name in "neg abs sign bitwise_not".split():
    _unary(getattr(aten, _name).default, _name)
for _name in "floor ceil trunc round".split():
    _unary(getattr(aten, _name).default, _name, int_identity=True)
_unary(aten.sgn.default, "sign")
_unary(aten.relu.default, "relu")
for _name in "isnan isinf signbit".split():
    _unary(getattr(aten, _name).default, _name, bool_out=True)


@register(aten.logical_not.default)
def logical_not(x):
    _check_real(x)
    return make_pointwise([to_dtype(x, torch.bool)], ops.logical_not, torch.bool)


def _binary(targets, fn, promote="default"):
    """promote: "default" (result type), "int_to_float", "bool" (compare in result type)."""

    @register(*targets)
    def lower(a, b):
        _check_real(a, b)
        common = result_type(a, b)
        if promote == "int_to_float":
            common = _float_of(common)
        if promote == "bool":
            return make_pointwise([a, b], fn, torch.bool, compute_dtype(common))
        return make_pointwise([a, b], fn, common)

    return lower


_binary([aten.mul.Tensor, aten.mul.Scalar], ops.mul)
_binary([aten.div.Tensor, aten.div.Scalar], ops.truediv, "int_to_float")
_binary([aten.remainder.Tensor, aten.remainder.Scalar], ops.mod)
_binary([aten.fmod.Tensor, aten.fmod.Scalar], ops.fmod)
_binary([aten.maximum.default], ops.maximum)
_binary([aten.minimum.default], ops.minimum)
_binary([aten.fmax.default], ops.fmax)
_binary([aten.fmin.default], ops.fmin)
_binary([aten.atan2.default], ops.atan2, "int_to_float")
_binary([aten.hypot.default], ops.hypot)
_binary([aten.copysign.Tensor, aten.copysign.Scalar], ops.copysign, "int_to_float")
_binary([aten.nextafter.default], ops.nextafter)
for _name, _op in (("bitwise_and", ops.bitwise_and), ("bitwise_or", ops.bitwise_or)):
    _binary([getattr(aten, _name).Tensor, getattr(aten, _name).Scalar], _op)
_binary([aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar], ops.bitwise_xor)
_binary([aten.bitwise_left_shift.Tensor], ops.lshift)
_binary([aten.bitwise_right_shift.Tensor], ops.rshift)
for _name in "eq ne lt le gt ge".split():
    _binary([getattr(aten, _name).Tensor, getattr(aten, _name).Scalar], getattr(ops, _name), "bool")


def _logical(target, fn):
    @register(target)
    def lower(a, b):
        _check_real(a, b)
        args = [to_dtype(x, torch.bool) if is_node(x) else bool(x) for x in (a, b)]
        return make_pointwise(args, fn, torch.bool)


_logical(aten.logical_and.default, ops.logical_and)
_logical(aten.logical_or.default, ops.logical_or)
_logical(aten.logical_xor.default, ops.logical_xor)


def _bitwise_checked(dtype):
    if dtype.is_floating_point:
        raise NotLowered("bitwise op on floats")


@register(aten.add.Tensor, aten.add.Scalar)
def add(a, b, alpha=1):
    _check_real(a, b)
    common = result_type(a, b)
    if alpha == 1:
        return make_pointwise([a, b], ops.add, common)
    c = compute_dtype(common)
    return make_pointwise(
        [a, b], lambda x, y: ops.add(x, ops.mul(y, ops.constant(alpha, c))), common
    )


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(a, b, alpha=1):
    _check_real(a, b)
    common = result_type(a, b)
    if common == torch.bool:
        raise NotLowered("bool subtraction is an error in eager")
    if alpha == 1:
        return make_pointwise([a, b], ops.sub, common)
    c = compute_dtype(common)
    return make_pointwise(
        [a, b], lambda x, y: ops.sub(x, ops.mul(y, ops.constant(alpha, c))), common
    )


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a, b, alpha=1):
    return sub(b, a, alpha)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, rounding_mode=None):
    _check_real(a, b)
    common = result_type(a, b)
    if rounding_mode is None:
        return make_pointwise([a, b], ops.truediv, _float_of(common))
    if common == torch.bool:
        raise NotLowered("bool division")
    if rounding_mode == "trunc":
        if common.is_floating_point:
            return make_pointwise([a, b], lambda x, y: ops.trunc(ops.truediv(x, y)), common)
        return make_pointwise([a, b], ops.truncdiv, common)
    if rounding_mode == "floor":
        return make_pointwise([a, b], ops.floordiv, common)
    raise NotLowered(f"rounding_mode {rounding_mode}")


@register(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(a, b):
    return div_mode(a, b, "floor")


@register(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def pow_(a, b):
    _check_real(a, b)
    common = result_type(a, b)
    if not is_node(b) and not common.is_floating_point and b < 0:
        raise NotLowered("integer to a negative power")
    if not is_node(b) and common.is_floating_point:
        # the exponents ATen's own kernel computes without pow (same values as eager); a
        # generic pow call also keeps the C++ loop from vectorizing (GELU's x**3)
        if b == 2:
            return make_pointwise([a], lambda x: ops.mul(x, x), common)
        if b == 3:
            return make_pointwise([a], lambda x: ops.mul(ops.mul(x, x), x), common)
        if b == 0.5:
            return make_pointwise([a], ops.sqrt, common)
        if b == -0.5:
            return make_pointwise([a], ops.rsqrt, common)
        if b == -1:
            return make_pointwise([a], ops.reciprocal, common)
        if b == -2:
            return make_pointwise([a], lambda x: ops.reciprocal(ops.mul(x, x)), common)
        if b == 1:
            return make_pointwise([a], lambda x: x, common)
    return make_pointwise([a, b], ops.pow, common)


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cond, a, b):
    _check_real(a, b)
    common = result_type(a, b)
    cond = to_dtype(cond, torch.bool) if is_node(cond) else bool(cond)
    return _where(cond, a, b, common)


def _where(cond, a, b, common):
    c = compute_dtype(common)
    from danlu_inductor.lowering.registry import broadcast_shapes, value_loader

    nodes = [x for x in (cond, a, b) if is_node(x)]
    size = broadcast_shapes(*[x.get_size() for x in nodes])
    lc = value_loader(cond, size, torch.bool)
    la = value_loader(a, size, c)
    lb = value_loader(b, size, c)

    def inner(index):
        v = ops.where(lc(index), la(index), lb(index))
        return v if c == common else ops.to_dtype(v, common)

    return StorageBox(Pointwise(common, size, inner))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x, mask, value):
    if is_node(value):
        value = to_dtype(value, x.get_dtype())
    elif not x.get_dtype().is_floating_point and isinstance(value, float):
        value = int(value)
    out = _where(mask, value, x, x.get_dtype())
    if list(out.get_size()) != list(x.get_size()):
        raise NotLowered("masked_fill broadcasting the input")
    return out


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(x, min=None, max=None):
    _check_real(x, min, max)
    common = result_type(x, min, max)
    out = x if common == x.get_dtype() else to_dtype(x, common)
    c = compute_dtype(common)
    # Written like eager: min(max(x, lo), hi), NaN in x propagates.
    if min is not None:
        out = make_pointwise([out, min], ops.maximum, common, c)
    if max is not None:
        out = make_pointwise([out, max], ops.minimum, common, c)
    return out


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, min):
    return clamp(x, min, None)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, max):
    return clamp(x, None, max)


@register(aten.hardtanh.default)
def hardtanh(x, min_val=-1.0, max_val=1.0):
    return clamp(x, min_val, max_val)


def _float_unary(target, body):
    @register(target)
    def lower(x, *args, **kwargs):
        _check_real(x)
        dtype = x.get_dtype()
        if not dtype.is_floating_point:
            raise NotLowered(f"{target} on {dtype}")
        c = compute_dtype(dtype)
        return make_pointwise([x], lambda v: body(v, c, *args, **kwargs), dtype)

    return lower


def _k(v, c):
    return ops.constant(v, c)


def _gelu(x, c, approximate="none"):
    if approximate == "tanh":
        inner = ops.mul(
            _k(math.sqrt(2.0 / math.pi), c),
            ops.add(x, ops.mul(_k(0.044715, c), ops.mul(x, ops.mul(x, x)))),
        )
        return ops.mul(ops.mul(_k(0.5, c), x), ops.add(_k(1.0, c), ops.tanh(inner)))
    cdf = ops.mul(_k(0.5, c), ops.add(_k(1.0, c), ops.erf(ops.mul(x, _k(math.sqrt(0.5), c)))))
    return ops.mul(x, cdf)


_float_unary(aten.gelu.default, _gelu)
_float_unary(aten.silu.default, lambda x, c: ops.mul(x, ops.sigmoid(x)))
_float_unary(
    aten.hardsigmoid.default,
    lambda x, c: ops.truediv(
        ops.minimum(ops.maximum(ops.add(x, _k(3.0, c)), _k(0.0, c)), _k(6.0, c)), _k(6.0, c)
    ),
)
_float_unary(
    aten.hardswish.default,
    lambda x, c: ops.mul(
        x,
        ops.truediv(
            ops.minimum(ops.maximum(ops.add(x, _k(3.0, c)), _k(0.0, c)), _k(6.0, c)), _k(6.0, c)
        ),
    ),
)
_float_unary(
    aten.leaky_relu.default,
    lambda x, c, negative_slope=0.01: ops.where(
        ops.gt(x, _k(0.0, c)), x, ops.mul(x, _k(negative_slope, c))
    ),
)
_float_unary(
    aten.elu.default,
    lambda x, c, alpha=1.0, scale=1.0, input_scale=1.0: ops.where(
        ops.gt(x, _k(0.0, c)),
        ops.mul(x, _k(scale, c)),
        ops.mul(ops.expm1(ops.mul(x, _k(input_scale, c))), _k(alpha * scale, c)),
    ),
)


@register(aten.gelu_backward.default)
def gelu_backward(grad, x, approximate="none"):
    dtype = x.get_dtype()
    if not dtype.is_floating_point or approximate != "none":
        raise NotLowered("gelu_backward variant")
    c = compute_dtype(dtype)

    def body(g, v):
        cdf = ops.mul(_k(0.5, c), ops.add(_k(1.0, c), ops.erf(ops.mul(v, _k(math.sqrt(0.5), c)))))
        pdf = ops.mul(
            _k(1.0 / math.sqrt(2 * math.pi), c), ops.exp(ops.mul(_k(-0.5, c), ops.mul(v, v)))
        )
        return ops.mul(g, ops.add(cdf, ops.mul(v, pdf)))

    return make_pointwise([grad, x], body, dtype)


@register(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    dtype = result_type(grad, x)
    c = compute_dtype(dtype)
    return make_pointwise(
        [grad, x],
        lambda g, v: ops.where(ops.le(v, ops.constant(threshold, c)), ops.constant(0, c), g),
        dtype,
    )


@register(aten.sigmoid_backward.default)
def sigmoid_backward(grad, y):
    dtype = result_type(grad, y)
    c = compute_dtype(dtype)
    return make_pointwise(
        [grad, y], lambda g, v: ops.mul(g, ops.mul(v, ops.sub(_k(1, c), v))), dtype
    )


@register(aten.tanh_backward.default)
def tanh_backward(grad, y):
    dtype = result_type(grad, y)
    c = compute_dtype(dtype)
    return make_pointwise(
        [grad, y], lambda g, v: ops.mul(g, ops.sub(_k(1, c), ops.mul(v, v))), dtype
    )


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(a, b, w):
    dtype = result_type(a, b)
    if not dtype.is_floating_point:
        raise NotLowered("lerp on integers")
    # eager: w < 0.5 ? a + w*(b-a) : b - (b-a)*(1-w)
    c = compute_dtype(dtype)

    def body(x, y, t):
        d = ops.sub(y, x)
        lo = ops.add(x, ops.mul(t, d))
        hi = ops.sub(y, ops.mul(d, ops.sub(_k(1.0, c), t)))
        return ops.where(ops.lt(ops.abs(t), _k(0.5, c)), lo, hi)

    return make_pointwise([a, b, w], body, dtype)


@register(aten.addcmul.default)
def addcmul(x, t1, t2, value=1):
    dtype = result_type(x, t1, t2)
    c = compute_dtype(dtype)
    return make_pointwise(
        [x, t1, t2],
        lambda a, b, d: ops.add(a, ops.mul(ops.mul(b, d), ops.constant(value, c))),
        dtype,
    )


@register(aten.addcdiv.default)
def addcdiv(x, t1, t2, value=1):
    dtype = result_type(x, t1, t2)
    if not dtype.is_floating_point:
        raise NotLowered("integer addcdiv")
    c = compute_dtype(dtype)
    return make_pointwise(
        [x, t1, t2],
        lambda a, b, d: ops.add(a, ops.mul(ops.truediv(b, d), ops.constant(value, c))),
        dtype,
    )


# ------------------------------------------------------------------- casts and copies


@register(aten._to_copy.default)
def to_copy(
    x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None
):
    # compile_fx lowers single-device graphs only: a device here is the graph's own
    if device is not None and torch.device(device).type not in ("cpu", "cuda"):
        raise NotLowered("device transfer")
    if dtype is None or dtype == x.get_dtype():
        return clone(x)
    _check_real(x)
    if dtype.is_complex:
        raise NotLowered("complex")
    return to_dtype(x, dtype)


@register(aten.clone.default)
def clone(x, memory_format=None):
    load = x.make_loader()
    return StorageBox(Pointwise(x.get_dtype(), x.get_size(), load))


@register(aten.copy.default)
def copy(dst, src, non_blocking=False):
    out = make_pointwise([src], lambda v: v, dst.get_dtype(), dst.get_dtype())
    if list(out.get_size()) != list(dst.get_size()):
        from danlu_inductor.lowering.views import expand

        out = expand(out, dst.get_size())
    return clone(out) if not isinstance(out, StorageBox) else out


@register(aten.lift_fresh_copy.default)
def lift_fresh_copy(x):
    return clone(x)


@register(aten.alias.default, aten.detach.default, aten.lift_fresh.default)
def alias(x):
    return x
