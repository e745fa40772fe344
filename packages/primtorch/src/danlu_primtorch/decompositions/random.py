"""Randomness written from ``rand``/``randn``/``randint``; dropout as a fused mask.

Values differ from eager's (different draws); checkers compare shapes and dtypes, and tests
check the distributions (mean, variance, keep rate).
"""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import to_dtype
from danlu_primtorch.decompositions.registry import register, values_unspecified

aten = torch.ops.aten


def _rand(shape, like, dtype=None, generator=None):
    dtype = dtype or like.dtype
    if generator is not None:
        return aten.rand.generator(
            list(shape), generator=generator, dtype=dtype, device=like.device
        )
    return aten.rand.default(list(shape), dtype=dtype, device=like.device)


def _randn(shape, like, dtype=None, generator=None):
    dtype = dtype or like.dtype
    if generator is not None:
        return aten.randn.generator(
            list(shape), generator=generator, dtype=dtype, device=like.device
        )
    return aten.randn.default(list(shape), dtype=dtype, device=like.device)


@register(aten.native_dropout.default)
def native_dropout(input, p, train):
    if not train or p == 0:
        return aten.clone.default(input), aten.full.default(
            list(input.shape), True, dtype=torch.bool, device=input.device
        )
    if p == 1:
        return (
            aten.mul.Tensor(input, 0),
            aten.full.default(list(input.shape), False, dtype=torch.bool, device=input.device),
        )
    keep = aten.ge.Scalar(
        _rand(
            input.shape, input, torch.float32 if not input.dtype.is_floating_point else input.dtype
        ),
        p,
    )
    return aten.mul.Tensor(aten.mul.Tensor(input, keep), 1.0 / (1.0 - p)), keep


@register(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    return aten.mul.Tensor(aten.mul.Tensor(grad_output, to_dtype(mask, grad_output.dtype)), scale)


@register(aten.bernoulli.p)
def bernoulli_p(self, p=0.5, *, generator=None):
    return to_dtype(
        aten.lt.Scalar(
            _rand(
                self.shape,
                self,
                torch.float32 if not self.dtype.is_floating_point else self.dtype,
                generator,
            ),
            p,
        ),
        self.dtype,
    )


@register(aten.rand_like.default)
def rand_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _rand(
        self.shape,
        self if device is None else aten.full.default([], 0, device=device),
        dtype or self.dtype,
    )


@register(aten.randn_like.default)
def randn_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _randn(
        self.shape,
        self if device is None else aten.full.default([], 0, device=device),
        dtype or self.dtype,
    )


@register(aten.randint.default)
def randint(high, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.randint.low(0, high, list(size), dtype=dtype or torch.int64, device=device)


@register(aten.randint_like.default)
def randint_like(
    self, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    return aten.randint.low(
        0, high, list(self.shape), dtype=dtype or self.dtype, device=device or self.device
    )


@register(aten.randint_like.low_dtype)
def randint_like_low(
    self, low, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    return aten.randint.low(
        low, high, list(self.shape), dtype=dtype or self.dtype, device=device or self.device
    )


@register(aten.normal.Tensor_Tensor)
def normal_tt(mean, std, *, generator=None):
    shape = torch.broadcast_shapes(mean.shape, std.shape)
    return aten.add.Tensor(aten.mul.Tensor(_randn(shape, mean, mean.dtype, generator), std), mean)


@register(aten.normal.Tensor_float)
def normal_tf(mean, std=1.0, *, generator=None):
    return aten.add.Tensor(
        aten.mul.Tensor(_randn(mean.shape, mean, mean.dtype, generator), std), mean
    )


@register(aten.normal.float_Tensor)
def normal_ft(mean, std, *, generator=None):
    return aten.add.Tensor(aten.mul.Tensor(_randn(std.shape, std, std.dtype, generator), std), mean)


@register(aten.normal.float_float)
def normal_ff(
    mean, std, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None
):
    like = aten.full.default([], 0, dtype=dtype or torch.get_default_dtype(), device=device)
    return aten.add.Tensor(aten.mul.Tensor(_randn(size, like, None, generator), std), mean)


@register(aten.normal_functional.default)
def normal_functional(self, mean=0.0, std=1.0, *, generator=None):
    return aten.add.Tensor(aten.mul.Tensor(_randn(self.shape, self, None, generator), std), mean)


@register(aten.uniform.default)
def uniform(self, from_=0.0, to=1.0, *, generator=None):
    return aten.add.Tensor(
        aten.mul.Tensor(_rand(self.shape, self, None, generator), to - from_), from_
    )


values_unspecified(
    aten.native_dropout.default,
    aten.bernoulli.p,
    aten.rand_like.default,
    aten.randn_like.default,
    aten.randint.default,
    aten.randint_like.default,
    aten.randint_like.low_dtype,
    aten.normal.Tensor_Tensor,
    aten.normal.Tensor_float,
    aten.normal.float_Tensor,
    aten.normal.float_float,
    aten.normal_functional.default,
    aten.uniform.default,
)
