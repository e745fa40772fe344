"""Pointwise ops that are not canonical: scalar spellings, clamps, fused and derived arithmetic."""

from __future__ import annotations

import math

import torch

from danlu_primtorch.decompositions._helpers import (
    default_float,
    result_dtype,
    scalar_like,
    to_dtype,
    where,
)
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


# --- .Scalar spellings: the .Tensor overloads take Python numbers as wrapped-number tensors,
# which keeps ATen's type promotion (a scalar never widens a tensor's dtype category).
@register(aten.add.Scalar)
def add_scalar(self, other, alpha=1):
    return aten.add.Tensor(self, other, alpha=alpha)


@register(aten.sub.Scalar)
def sub_scalar(self, other, alpha=1):
    return aten.sub.Tensor(self, other, alpha=alpha)


@register(aten.mul.Scalar)
def mul_scalar(self, other):
    return aten.mul.Tensor(self, other)


@register(aten.div.Scalar)
def div_scalar(self, other):
    return aten.div.Tensor(self, other)


@register(aten.div.Scalar_mode)
def div_scalar_mode(self, other, *, rounding_mode):
    return aten.div.Tensor_mode(self, other, rounding_mode=rounding_mode)


@register(aten.remainder.Scalar)
def remainder_scalar(self, other):
    return aten.remainder.Tensor(self, scalar_like(other, self))


@register(aten.remainder.Scalar_Tensor)
def remainder_scalar_tensor(self, other):
    return aten.remainder.Tensor(aten.scalar_tensor.default(self, device=other.device), other)


@register(aten.fmod.Scalar)
def fmod_scalar(self, other):
    return aten.fmod.Tensor(self, scalar_like(other, self))


@register(aten.floor_divide.default)
def floor_divide(self, other):
    return aten.div.Tensor_mode(self, other, rounding_mode="floor")


@register(aten.floor_divide.Scalar)
def floor_divide_scalar(self, other):
    return aten.div.Tensor_mode(self, other, rounding_mode="floor")


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(self, other, alpha=1):
    return aten.sub.Tensor(other, self, alpha=alpha)


@register(aten.bitwise_and.Scalar)
def bitwise_and_scalar(self, other):
    return aten.bitwise_and.Tensor(self, scalar_like(other, self))


@register(aten.bitwise_or.Scalar)
def bitwise_or_scalar(self, other):
    return aten.bitwise_or.Tensor(self, scalar_like(other, self))


@register(aten.bitwise_xor.Scalar)
def bitwise_xor_scalar(self, other):
    return aten.bitwise_xor.Tensor(self, scalar_like(other, self))


@register(aten.bitwise_left_shift.Tensor_Scalar)
def lshift_scalar(self, other):
    return aten.bitwise_left_shift.Tensor(self, scalar_like(other, self))


@register(aten.bitwise_right_shift.Tensor_Scalar)
def rshift_scalar(self, other):
    return aten.bitwise_right_shift.Tensor(self, scalar_like(other, self))


@register(aten.copysign.Scalar)
def copysign_scalar(self, other):
    return aten.copysign.Tensor(self, scalar_like(other, self))


# --- Clamps: max then min, so min > max gives max (ATen's rule); NaN propagates through both.
@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    out = self
    if min is not None:
        out = aten.maximum.default(out, _as_tensor(min, self))
    if max is not None:
        out = aten.minimum.default(out, _as_tensor(max, self))
    return out


def _as_tensor(v, like):
    if isinstance(v, torch.Tensor):
        return v
    return scalar_like(v, like)


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(self, min):
    return clamp(self, min=min)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(self, max):
    return clamp(self, max=max)


# --- Fused arithmetic, in ATen's evaluation order so float32 rounding matches.
@register(aten.addcmul.default)
def addcmul(self, tensor1, tensor2, *, value=1):
    prod = aten.mul.Tensor(tensor1, tensor2)
    if value != 1:
        prod = aten.mul.Tensor(prod, value)
    return aten.add.Tensor(self, prod)


@register(aten.addcdiv.default)
def addcdiv(self, tensor1, tensor2, *, value=1):
    if not (tensor1.dtype.is_floating_point or tensor1.dtype.is_complex) and not (
        tensor2.dtype.is_floating_point or tensor2.dtype.is_complex
    ):
        raise RuntimeError("Integer division with addcdiv is no longer supported")
    quot = aten.div.Tensor(tensor1, tensor2)
    if value != 1:
        quot = aten.mul.Tensor(quot, value)
    return aten.add.Tensor(self, quot)


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(self, end, weight):
    # ATen's two-sided formula: accurate at both ends of [0, 1]
    diff = aten.sub.Tensor(end, self)
    w = (
        weight
        if isinstance(weight, torch.Tensor)
        else aten.scalar_tensor.default(weight, dtype=self.dtype, device=self.device)
    )
    low = aten.add.Tensor(self, aten.mul.Tensor(w, diff))
    high = aten.sub.Tensor(end, aten.mul.Tensor(diff, aten.rsub.Scalar(w, 1)))
    return where(aten.lt.Scalar(aten.abs.default(w), 0.5), low, high)


@register(aten.frac.default)
def frac(self):
    return aten.sub.Tensor(self, aten.trunc.default(self))


@register(aten.deg2rad.default)
def deg2rad(self):
    return aten.mul.Tensor(_float(self), math.pi / 180.0)


@register(aten.rad2deg.default)
def rad2deg(self):
    return aten.mul.Tensor(_float(self), 180.0 / math.pi)


def _float(x):
    return to_dtype(x, default_float(x.dtype))


@register(aten.sinc.default)
def sinc(self):
    x = aten.mul.Tensor(_float(self), math.pi)
    return where(aten.eq.Scalar(x, 0), 1.0, aten.div.Tensor(aten.sin.default(x), x))


@register(aten.logit.default)
def logit(self, eps=None):
    x = _float(self)
    if eps is not None:
        x = clamp(x, eps, 1.0 - eps)
    return aten.log.default(aten.div.Tensor(x, aten.rsub.Scalar(x, 1)))


@register(aten.xlogy.Tensor)
def xlogy(self, other):
    if not isinstance(self, torch.Tensor):
        self = aten.scalar_tensor.default(self, dtype=torch.float64, device=other.device)
    dtype = result_dtype(self, other)
    dtype = default_float(dtype)
    x, y = to_dtype(self, dtype), to_dtype(other, dtype)
    out = where(aten.eq.Scalar(x, 0), 0.0, aten.mul.Tensor(x, aten.log.default(y)))
    return where(aten.isnan.default(y), float("nan"), out)


@register(aten.xlogy.Scalar_Other)
def xlogy_scalar_other(self, other):
    return xlogy(self, aten.scalar_tensor.default(other, dtype=torch.float64, device=self.device))


@register(aten.xlogy.Scalar_Self)
def xlogy_scalar_self(self, other):
    return xlogy(self, other)


@register(aten.special_xlog1py.default)
def xlog1py(self, other):
    dtype = default_float(result_dtype(self, other))
    x, y = to_dtype(self, dtype), to_dtype(other, dtype)
    out = where(aten.eq.Scalar(x, 0), 0.0, aten.mul.Tensor(x, aten.log1p.default(y)))
    return where(aten.isnan.default(y), float("nan"), out)


@register(aten.logaddexp.default)
def logaddexp(self, other):
    hi, lo = aten.maximum.default(self, other), aten.minimum.default(self, other)
    out = aten.add.Tensor(hi, aten.log1p.default(aten.exp.default(aten.sub.Tensor(lo, hi))))
    # both -inf or both +inf: the subtraction above is NaN, the answer is that infinity
    same_inf = aten.logical_and.default(aten.isinf.default(hi), aten.eq.Tensor(hi, lo))
    return where(same_inf, hi, out)


@register(aten.logaddexp2.default)
def logaddexp2(self, other):
    hi, lo = aten.maximum.default(self, other), aten.minimum.default(self, other)
    d = aten.exp2.default(aten.sub.Tensor(lo, hi))
    out = aten.add.Tensor(hi, aten.div.Tensor(aten.log1p.default(d), math.log(2.0)))
    same_inf = aten.logical_and.default(aten.isinf.default(hi), aten.eq.Tensor(hi, lo))
    return where(same_inf, hi, out)


@register(aten.heaviside.default)
def heaviside(self, values):
    if self.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    zero = aten.eq.Scalar(self, 0)
    pos = to_dtype(aten.gt.Scalar(self, 0), self.dtype)
    return where(zero, values, pos)


@register(aten.nan_to_num.default)
def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
    if not self.dtype.is_floating_point:
        return aten.clone.default(self)
    info = torch.finfo(self.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(aten.isnan.default(self), nan, self)
    out = where(aten.isposinf.default(self), posinf, out)
    return where(aten.isneginf.default(self), neginf, out)


@register(aten.isposinf.default)
def isposinf(self):
    if not self.dtype.is_floating_point:
        return aten.full.default(list(self.shape), False, dtype=torch.bool, device=self.device)
    return aten.eq.Scalar(self, float("inf"))


@register(aten.isneginf.default)
def isneginf(self):
    if not self.dtype.is_floating_point:
        return aten.full.default(list(self.shape), False, dtype=torch.bool, device=self.device)
    return aten.eq.Scalar(self, float("-inf"))


@register(aten.ldexp.Tensor)
def ldexp(self, other):
    x = _float(self)
    return aten.mul.Tensor(x, aten.exp2.default(to_dtype(other, x.dtype)))


@register(aten.angle.default)
def angle(self):
    if self.dtype.is_complex:
        return NotImplemented  # complex angle stays an ATen op
    x = _float(self)
    out = where(aten.lt.Scalar(x, 0), math.pi, 0.0)
    out = to_dtype(out, x.dtype)
    return where(aten.isnan.default(x), x, out)


@register(aten.special_entr.default)
def entr(self):
    x = _float(self)
    neg = aten.mul.Tensor(aten.neg.default(x), aten.log.default(x))
    out = where(aten.eq.Scalar(x, 0), 0.0, neg)
    out = where(aten.lt.Scalar(x, 0), float("-inf"), out)
    return where(aten.isnan.default(x), x, out)
