"""Creation ops written from ``full``, ``empty_strided``, ``arange.start_step`` and ``scalar_tensor``."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import to_dtype, where
from danlu_primtorch.decompositions.registry import register, values_unspecified

aten = torch.ops.aten


def _contiguous_strides(shape) -> list[int]:
    strides, acc = [], 1
    for s in reversed(list(shape)):
        strides.append(acc)
        acc *= max(s, 1)
    return strides[::-1]


def _like_strides(x: torch.Tensor, memory_format) -> list[int]:
    """Strides ``*_like`` ops give their result: preserve a dense input's layout, else contiguous."""
    if memory_format not in (None, torch.preserve_format):
        if memory_format == torch.channels_last and x.dim() == 4:
            n, c, h, w = x.shape
            return [h * w * c, 1, w * c, c]
        if memory_format == torch.channels_last_3d and x.dim() == 5:
            n, c, d, h, w = x.shape
            return [d * h * w * c, 1, h * w * c, w * c, c]
        return _contiguous_strides(x.shape)
    # a non-overlapping dense input keeps its dim order (ATen's preserve_format rule)
    order = sorted(range(x.dim()), key=lambda d: (x.stride()[d], -d), reverse=True)
    strides, acc = [0] * x.dim(), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(x.shape[d], 1)
    dense = all(s == 1 or st == want for s, st, want in zip(x.shape, x.stride(), strides))
    return strides if dense else _contiguous_strides(x.shape)


def _dd(x, dtype, device):
    return dtype if dtype is not None else x.dtype, device if device is not None else x.device


def _filled(shape, strides, value, dtype, device):
    out = aten.empty_strided.default(list(shape), strides, dtype=dtype, device=device)
    return aten.copy.default(out, aten.full.default([], value, dtype=dtype, device=device))


@register(aten.full_like.default)
def full_like(
    self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    dtype, device = _dd(self, dtype, device)
    strides = _like_strides(self, memory_format)
    if strides == _contiguous_strides(self.shape):
        return aten.full.default(list(self.shape), fill_value, dtype=dtype, device=device)
    return _filled(self.shape, strides, fill_value, dtype, device)


@register(aten.zeros_like.default)
def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_like(self, 0, dtype=dtype, device=device, memory_format=memory_format)


@register(aten.ones_like.default)
def ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_like(self, 1, dtype=dtype, device=device, memory_format=memory_format)


@register(aten.empty_like.default)
def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype, device = _dd(self, dtype, device)
    return aten.empty_strided.default(
        list(self.shape), _like_strides(self, memory_format), dtype=dtype, device=device
    )


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = dtype or torch.get_default_dtype()
    if memory_format == torch.channels_last and len(size) == 4:
        n, c, h, w = size
        strides = [h * w * c, 1, w * c, c]
    else:
        strides = _contiguous_strides(size)
    return aten.empty_strided.default(list(size), strides, dtype=dtype, device=device)


@register(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    strides, acc = [0] * len(size), 1
    for d in reversed(physical_layout):
        strides[d] = acc
        acc *= max(size[d], 1)
    dtype = dtype or torch.get_default_dtype()
    return aten.empty_strided.default(list(size), strides, dtype=dtype, device=device)


@register(aten.new_empty.default)
def new_empty(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, device = _dd(self, dtype, device)
    return aten.empty_strided.default(
        list(size), _contiguous_strides(size), dtype=dtype, device=device
    )


@register(aten.new_empty_strided.default)
def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, device = _dd(self, dtype, device)
    return aten.empty_strided.default(list(size), list(stride), dtype=dtype, device=device)


values_unspecified(
    aten.empty_like.default,
    aten.empty.memory_format,
    aten.empty_permuted.default,
    aten.new_empty.default,
    aten.new_empty_strided.default,
)


@register(aten.new_full.default)
def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, device = _dd(self, dtype, device)
    return aten.full.default(list(size), fill_value, dtype=dtype, device=device)


@register(aten.new_zeros.default)
def new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return new_full(self, size, 0, dtype=dtype, device=device)


@register(aten.new_ones.default)
def new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return new_full(self, size, 1, dtype=dtype, device=device)


@register(aten.zeros.default)
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.full.default(list(size), 0, dtype=dtype or torch.get_default_dtype(), device=device)


@register(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.full.default(list(size), 1, dtype=dtype or torch.get_default_dtype(), device=device)


@register(aten.fill.Scalar)
def fill_scalar(self, value):
    return full_like(self, value)


@register(aten.fill.Tensor)
def fill_tensor(self, value):
    if value.dim() != 0:
        raise RuntimeError(
            f"fill only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
        )
    return aten.clone.default(aten.expand.default(to_dtype(value, self.dtype), list(self.shape)))


@register(aten.zero.default)
def zero(self):
    return full_like(self, 0)


def _arange_dtype(start, end, step):
    if any(isinstance(v, float) for v in (start, end, step)):
        return torch.get_default_dtype()
    return torch.int64


@register(aten.arange.default)
def arange(end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.arange.start_step(0, end, 1, dtype=dtype or _arange_dtype(0, end, 1), device=device)


@register(aten.arange.start)
def arange_start(start, end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.arange.start_step(
        start, end, 1, dtype=dtype or _arange_dtype(start, end, 1), device=device
    )


@register(aten.eye.default)
def eye(n, *, dtype=None, layout=None, device=None, pin_memory=None):
    return eye_m(n, n, dtype=dtype, device=device)


@register(aten.eye.m)
def eye_m(n, m, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = dtype or torch.get_default_dtype()
    r = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=device)
    c = aten.arange.start_step(0, m, 1, dtype=torch.int64, device=device)
    return to_dtype(
        aten.eq.Tensor(aten.unsqueeze.default(r, 1), aten.unsqueeze.default(c, 0)), dtype
    )


@register(aten.linspace.default)
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = dtype or torch.get_default_dtype()
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    compute = torch.float64 if not dtype.is_floating_point else dtype
    if steps <= 1:
        return aten.full.default([steps], start, dtype=dtype, device=device)
    i = aten.arange.start_step(0, steps, 1, dtype=compute, device=device)
    step = (end - start) / (steps - 1)
    # ATen fills the first half forwards from start and the second half backwards from end
    fwd = aten.add.Tensor(aten.mul.Tensor(i, step), start)
    bwd = aten.sub.Tensor(end, aten.mul.Tensor(aten.rsub.Scalar(i, steps - 1), step))
    out = where(aten.lt.Scalar(i, steps // 2), fwd, bwd)
    return to_dtype(out, dtype)


@register(aten.logspace.default)
def logspace(
    start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None
):
    dtype = dtype or torch.get_default_dtype()
    compute = torch.float64 if not dtype.is_floating_point else dtype
    exps = linspace(start, end, steps, dtype=compute, device=device)
    return to_dtype(aten.pow.Scalar(base, exps), dtype)


def _tri_indices(row, col, offset, upper, dtype, device):
    rows = aten.arange.start_step(0, row, 1, dtype=torch.int64, device=device)
    cols = aten.arange.start_step(0, col, 1, dtype=torch.int64, device=device)
    d = aten.sub.Tensor(aten.unsqueeze.default(cols, 0), aten.unsqueeze.default(rows, 1))
    mask = aten.ge.Scalar(d, offset) if upper else aten.le.Scalar(d, offset)
    # the count is known from the shapes alone, so the nonzero is static: compute it in Python
    n = sum(
        max(0, min(col, r + offset + 1)) if not upper else max(0, col - max(0, r + offset))
        for r in range(row)
    )
    flat = aten.view.default(mask, [-1])
    order = aten.sort.stable(aten.logical_not.default(flat), stable=True)[1]
    idx = aten.slice.Tensor(order, 0, 0, n)
    r = aten.div.Tensor_mode(idx, col, rounding_mode="floor") if col else idx
    c = aten.remainder.Tensor(
        idx, aten.scalar_tensor.default(max(col, 1), dtype=torch.int64, device=device)
    )
    return to_dtype(aten.stack.default([r, c]), dtype)


@register(aten.tril_indices.default)
def tril_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _tri_indices(row, col, offset, False, dtype or torch.int64, device)


@register(aten.triu_indices.default)
def triu_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _tri_indices(row, col, offset, True, dtype or torch.int64, device)


@register(aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar, aten.linspace.Scalar_Tensor)
def linspace_tensor(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = dtype or torch.get_default_dtype()
    compute = torch.float64 if not dtype.is_floating_point else dtype
    if steps <= 1:
        v = (
            start
            if isinstance(start, torch.Tensor)
            else aten.scalar_tensor.default(start, dtype=compute)
        )
        return to_dtype(
            aten.expand.default(aten.view.default(to_dtype(v, compute), [1]), [steps]), dtype
        )
    s = to_dtype(start, compute) if isinstance(start, torch.Tensor) else start
    e = to_dtype(end, compute) if isinstance(end, torch.Tensor) else end
    i = aten.arange.start_step(0, steps, 1, dtype=compute, device=device)
    step = aten.div.Tensor(
        aten.sub.Tensor(e, s) if isinstance(e, torch.Tensor) else aten.rsub.Scalar(s, e), steps - 1
    )
    fwd = aten.add.Tensor(aten.mul.Tensor(i, step), s)
    bwd = (
        aten.sub.Tensor(e, aten.mul.Tensor(aten.rsub.Scalar(i, steps - 1), step))
        if isinstance(e, torch.Tensor)
        else aten.rsub.Scalar(aten.mul.Tensor(aten.rsub.Scalar(i, steps - 1), step), e)
    )
    out = where(aten.lt.Scalar(i, steps // 2), fwd, bwd)
    return to_dtype(out, dtype)


@register(aten.logspace.Tensor_Tensor, aten.logspace.Tensor_Scalar, aten.logspace.Scalar_Tensor)
def logspace_tensor(
    start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None
):
    dtype = dtype or torch.get_default_dtype()
    compute = torch.float64 if not dtype.is_floating_point else dtype
    exps = linspace_tensor(start, end, steps, dtype=compute, device=device)
    return to_dtype(aten.pow.Scalar(base, exps), dtype)
