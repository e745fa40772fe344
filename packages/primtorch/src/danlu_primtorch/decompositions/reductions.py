"""Reductions written from the canonical ones (sum, prod, amax/amin, var, arg*, any/all)."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import (
    numel_of,
    reduction_dims,
    to_dtype,
    where,
    wrap_dim,
)
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _sum_dtype(x, dtype):
    if dtype is not None:
        return dtype
    # integer and bool sums accumulate in int64, as ATen does
    return torch.int64 if not (x.dtype.is_floating_point or x.dtype.is_complex) else x.dtype


@register(aten.sum.default)
def sum_default(self, *, dtype=None):
    return aten.sum.dim_IntList(self, [], False, dtype=_sum_dtype(self, dtype))


@register(aten.nansum.default)
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    x = where(aten.isnan.default(self), 0, self) if self.dtype.is_floating_point else self
    return aten.sum.dim_IntList(
        x, dim if dim is not None else [], keepdim, dtype=_sum_dtype(self, dtype)
    )


@register(aten.prod.default)
def prod_default(self, *, dtype=None):
    x = aten.view.default(self, [-1])
    return aten.prod.dim_int(x, 0, False, dtype=_sum_dtype(self, dtype))


@register(aten.mean.default)
def mean_default(self, *, dtype=None):
    return mean_dim(self, None, False, dtype=dtype)


@register(aten.mean.dim)
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    out_dtype = dtype or self.dtype
    if not (out_dtype.is_floating_point or out_dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {out_dtype}"
        )
    dims = reduction_dims(dim, self.dim())
    x = to_dtype(self, out_dtype)
    s = aten.sum.dim_IntList(x, dims, keepdim)
    return aten.div.Tensor(s, numel_of(self, dims))


@register(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    return aten.sqrt.default(aten.var.correction(self, dim, correction=correction, keepdim=keepdim))


@register(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    var = aten.var.correction(self, dim, correction=correction, keepdim=keepdim)
    return var, _mean_any(self, dim, keepdim)


@register(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    var = aten.var.correction(self, dim, correction=correction, keepdim=keepdim)
    return aten.sqrt.default(var), _mean_any(self, dim, keepdim)


def _mean_any(x, dim, keepdim):
    dims = reduction_dims(dim, x.dim())
    return aten.div.Tensor(aten.sum.dim_IntList(x, dims, keepdim), numel_of(x, dims))


@register(aten.any.default)
def any_default(self):
    return aten.any.dims(self, None, False)


@register(aten.any.dim)
def any_dim(self, dim, keepdim=False):
    return aten.any.dims(self, [dim], keepdim)


@register(aten.all.default)
def all_default(self):
    return aten.all.dims(self, None, False)


@register(aten.all.dim)
def all_dim(self, dim, keepdim=False):
    return aten.all.dims(self, [dim], keepdim)


@register(aten.max.default)
def max_default(self):
    if self.numel() == 0:
        raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0.")
    return aten.amax.default(self, [], False)


@register(aten.min.default)
def min_default(self):
    if self.numel() == 0:
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0.")
    return aten.amin.default(self, [], False)


@register(aten.max.dim)
def max_dim(self, dim, keepdim=False):
    return aten.amax.default(self, [dim], keepdim), aten.argmax.default(
        _argable(self), dim, keepdim
    )


def _argable(x):
    # argmax/argmin refuse bool; uint8 orders the same way
    return to_dtype(x, torch.uint8) if x.dtype == torch.bool else x


@register(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    return aten.amin.default(self, [dim], keepdim), aten.argmin.default(
        _argable(self), dim, keepdim
    )


@register(aten.aminmax.default)
def aminmax(self, *, dim=None, keepdim=False):
    dims = [] if dim is None else [dim]
    if dim is None and keepdim:
        dims = list(range(self.dim()))
    return aten.amin.default(self, dims, keepdim), aten.amax.default(self, dims, keepdim)


@register(aten.logsumexp.default)
def logsumexp(self, dim, keepdim=False):
    x = self if self.dtype.is_floating_point else to_dtype(self, torch.get_default_dtype())
    dims = reduction_dims(dim, x.dim())
    if x.numel() == 0:
        return aten.log.default(aten.sum.dim_IntList(aten.exp.default(x), dims, keepdim))
    m = aten.amax.default(x, dims, True)
    m = where(aten.isinf.default(m), 0.0, m)  # all -inf (or +inf) rows: no shift, no NaN
    s = aten.sum.dim_IntList(aten.exp.default(aten.sub.Tensor(x, m)), dims, keepdim)
    if not keepdim:
        m = aten.squeeze.dims(m, dims)
    return aten.add.Tensor(aten.log.default(s), m)


@register(aten.linalg_vector_norm.default)
def vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = to_dtype(self, dtype)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {x.dtype}"
        )
    dims = reduction_dims(dim, x.dim())
    a = aten.abs.default(x)
    if ord == float("inf"):
        return aten.amax.default(a, dims, keepdim)
    if ord == float("-inf"):
        return aten.amin.default(a, dims, keepdim)
    if ord == 0:
        return aten.sum.dim_IntList(to_dtype(aten.ne.Scalar(a, 0), a.dtype), dims, keepdim)
    if ord == 1:
        return aten.sum.dim_IntList(a, dims, keepdim)
    if ord == 2:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(a, a), dims, keepdim))
    s = aten.sum.dim_IntList(aten.pow.Tensor_Scalar(a, ord), dims, keepdim)
    return aten.pow.Tensor_Scalar(s, 1.0 / ord)


@register(aten.norm.ScalarOpt_dim, aten.norm.ScalarOpt_dim_dtype)
def norm_dim(self, p, dim, keepdim=False, *, dtype=None):
    return vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


@register(aten.norm.Scalar, aten.norm.ScalarOpt_dtype)
def norm_all(self, p=2, *, dtype=None):
    return vector_norm(self, 2 if p is None else p, None, False, dtype=dtype)


@register(aten.dist.default)
def dist(self, other, p=2):
    return vector_norm(aten.sub.Tensor(self, other), p)


@register(aten.count_nonzero.dim_IntList)
def count_nonzero(self, dim):
    return aten.sum.dim_IntList(
        aten.ne.Scalar(self, 0), reduction_dims(dim, self.dim()), False, dtype=torch.int64
    )


@register(aten.count_nonzero.default)
def count_nonzero_one(self, dim=None):
    return count_nonzero(self, [] if dim is None else [dim])


@register(aten.trace.default)
def trace(self):
    return aten.sum.dim_IntList(
        aten.diagonal.default(self), [], False, dtype=_sum_dtype(self, None)
    )


@register(aten.logcumsumexp.default)
def logcumsumexp(self, dim):
    if self.dim() == 0 or self.numel() == 0:
        return aten.clone.default(self)
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    # out[i] = logsumexp(x[j] for j <= i), as a masked [.., i, j] logsumexp: exact at any value
    # range, quadratic in the scanned length (a scan template would be linear)
    x = aten.unsqueeze.default(_move_last(self, dim), -2)
    j = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=self.device)
    causal = aten.le.Tensor(aten.unsqueeze.default(j, 0), aten.unsqueeze.default(j, 1))
    masked = where(causal, x, float("-inf"))
    out = logsumexp(masked, [-1], False)
    return _move_back(out, dim)


def _move_last(x, dim):
    perm = [d for d in range(x.dim()) if d != dim] + [dim]
    return aten.permute.default(x, perm)


def _move_back(x, dim):
    n = x.dim()
    perm = list(range(n - 1))
    perm.insert(dim, n - 1)
    return aten.permute.default(x, perm)


@register(aten.median.default)
def median(self):
    flat = aten.view.default(self, [-1])
    n = flat.shape[0]
    if n == 0:
        return aten.full.default([], float("nan"), dtype=self.dtype, device=self.device)
    s = aten.sort.default(flat)[0]  # NaNs sort last, so a NaN anywhere lands in the max slot
    mid = aten.select.int(s, 0, (n - 1) // 2)
    if self.dtype.is_floating_point:
        return where(aten.isnan.default(aten.select.int(s, 0, n - 1)), float("nan"), mid)
    return aten.clone.default(mid)


@register(aten.nanmedian.default)
def nanmedian(self):
    flat = aten.view.default(self, [-1])
    n = flat.shape[0]
    if n == 0:
        return aten.full.default([], float("nan"), dtype=self.dtype, device=self.device)
    s = aten.sort.default(flat)[0]
    if not self.dtype.is_floating_point:
        return aten.clone.default(aten.select.int(s, 0, (n - 1) // 2))
    # k = (number of non-NaN - 1) // 2, read with a gather (the count is data-dependent)
    valid = aten.sum.dim_IntList(
        aten.logical_not.default(aten.isnan.default(flat)), [], False, dtype=torch.int64
    )
    k = aten.div.Tensor_mode(
        aten.sub.Tensor(aten.clamp.default(valid, 1), 1), 2, rounding_mode="floor"
    )
    return aten.squeeze.dims(aten.gather.default(s, 0, aten.view.default(k, [1])), [0])


def _cum_extreme(self, dim, is_max):
    """cummax/cummin as a masked [.., i, j] reduction over j <= i (quadratic in the scan length).

    Index rule (ATen's): the last position holding the running extreme (``>=`` / ``<=``
    comparisons); once a NaN is seen the value stays NaN and the index is the latest NaN.
    """
    if self.dim() == 0:
        return aten.clone.default(self), aten.full.default(
            [], 0, dtype=torch.int64, device=self.device
        )
    dim = wrap_dim(dim, self.dim())
    if self.numel() == 0:
        return aten.clone.default(self), aten.full.default(
            list(self.shape), 0, dtype=torch.int64, device=self.device
        )
    n = self.shape[dim]
    x = _move_last(self, dim)
    j = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=self.device)
    causal = aten.le.Tensor(aten.unsqueeze.default(j, 0), aten.unsqueeze.default(j, 1))  # [i, j]
    xs = aten.unsqueeze.default(x, -2)  # [..., 1, j]
    if self.dtype == torch.bool:
        xs_c = to_dtype(xs, torch.uint8)
    else:
        xs_c = xs
    fill = _extreme_fill(xs_c.dtype, is_max)
    masked = where(causal, xs_c, fill)
    values = (
        aten.amax.default(masked, [-1], False) if is_max else aten.amin.default(masked, [-1], False)
    )
    # positions j <= i equal to the running value (NaN counts as equal to NaN), take the last one
    v = aten.unsqueeze.default(values, -1)
    hit = aten.eq.Tensor(masked, v)
    if self.dtype.is_floating_point:
        hit = aten.logical_or.default(
            hit, aten.logical_and.default(aten.isnan.default(masked), aten.isnan.default(v))
        )
    hit = aten.logical_and.default(hit, causal)
    pos = where(hit, aten.unsqueeze.default(j, 0), -1)
    idx = aten.amax.default(pos, [-1], False)
    values = to_dtype(values, self.dtype)
    return _move_back(values, dim), _move_back(idx, dim)


def _extreme_fill(dtype, is_max):
    if dtype.is_floating_point:
        return float("-inf") if is_max else float("inf")
    info = torch.iinfo(dtype)
    return info.min if is_max else info.max


@register(aten.cummax.default)
def cummax(self, dim):
    return _cum_extreme(self, dim, True)


@register(aten.cummin.default)
def cummin(self, dim):
    return _cum_extreme(self, dim, False)


def _select_sorted(self, k, dim, keepdim, nan_propagates):
    """The k-th smallest (0-based) along dim, with its index, through a stable sort."""
    if self.dim() == 0:
        return aten.clone.default(self), aten.full.default(
            [], 0, dtype=torch.int64, device=self.device
        )
    dim = wrap_dim(dim, self.dim())
    vals, idx = aten.sort.stable(self, stable=True, dim=dim)
    v = aten.select.int(vals, dim, k)
    i = aten.select.int(idx, dim, k)
    if nan_propagates and self.dtype.is_floating_point:
        # NaNs sort last: a row holding one has its median at the first NaN
        n = self.shape[dim]
        nan_count = aten.sum.dim_IntList(aten.isnan.default(self), [dim], False, dtype=torch.int64)
        first_nan = aten.sub.Tensor(n, aten.clamp.default(nan_count, 1))
        has_nan = aten.gt.Scalar(nan_count, 0)
        at = aten.unsqueeze.default(first_nan, dim)
        v = where(has_nan, aten.squeeze.dims(aten.gather.default(vals, dim, at), [dim]), v)
        i = where(has_nan, aten.squeeze.dims(aten.gather.default(idx, dim, at), [dim]), i)
    if keepdim:
        v, i = aten.unsqueeze.default(v, dim), aten.unsqueeze.default(i, dim)
    return v, i


# not registered: among tied values eager's quickselect returns an index a stable sort does
# not reproduce (the OpInfo sweep sees it on integer samples), so kthvalue stays an ATen op
def kthvalue(self, k, dim=-1, keepdim=False):
    n = self.shape[wrap_dim(dim, self.dim())] if self.dim() else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _select_sorted(self, k - 1, dim, keepdim, True)


@register(aten.median.dim)
def median_dim(self, dim, keepdim=False):
    n = self.shape[wrap_dim(dim, self.dim())] if self.dim() else 1
    if n == 0:
        raise IndexError("median(): Expected reduction dim to have non-zero size.")
    return _select_sorted(self, (n - 1) // 2, dim, keepdim, True)


# not registered: for an all-NaN row eager's quickselect returns an index (0 for 3 NaNs, 2 for
# 4) that no sort reproduces; nanmedian.dim stays an ATen op
def nanmedian_dim(self, dim, keepdim=False):
    if self.dim() == 0:
        return aten.clone.default(self), aten.full.default(
            [], 0, dtype=torch.int64, device=self.device
        )
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    if n == 0:
        raise IndexError("nanmedian(): Expected reduction dim to have non-zero size.")
    if not self.dtype.is_floating_point:
        return _select_sorted(self, (n - 1) // 2, dim, keepdim, False)
    vals, idx = aten.sort.stable(self, stable=True, dim=dim)
    # NaNs sort last: the median of the non-NaN prefix sits at (count - 1) // 2 (all NaN: 0)
    valid = aten.sum.dim_IntList(
        aten.logical_not.default(aten.isnan.default(self)), [dim], True, dtype=torch.int64
    )
    k = aten.div.Tensor_mode(
        aten.sub.Tensor(aten.clamp.default(valid, 1), 1), 2, rounding_mode="floor"
    )
    v = aten.gather.default(vals, dim, k)
    i = aten.gather.default(idx, dim, k)
    if not keepdim:
        v, i = aten.squeeze.dims(v, [dim]), aten.squeeze.dims(i, [dim])
    return v, i


@register(aten.histc.default)
def histc(self, bins=100, min=0, max=0):
    if not self.dtype.is_floating_point:
        raise RuntimeError(
            f"\"histogram_cpu\" not implemented for '{str(self.dtype).replace('torch.', '').title()}'"
        )
    x = aten.view.default(self, [-1])
    lo = aten.scalar_tensor.default(min, dtype=self.dtype, device=self.device)
    hi = aten.scalar_tensor.default(max, dtype=self.dtype, device=self.device)
    if min == max:
        # min == max asks for the data's range; an empty or constant input widens it by 1
        if x.numel():
            lo, hi = aten.amin.default(x, [0], False), aten.amax.default(x, [0], False)
        same = aten.eq.Tensor(lo, hi)
        lo = where(same, aten.sub.Tensor(lo, 1), lo)
        hi = where(same, aten.add.Tensor(hi, 1), hi)
    inside = aten.logical_and.default(aten.ge.Tensor(x, lo), aten.le.Tensor(x, hi))
    pos = aten.div.Tensor(aten.mul.Tensor(aten.sub.Tensor(x, lo), bins), aten.sub.Tensor(hi, lo))
    b = aten.clamp.default(to_dtype(pos, torch.int64), 0, bins - 1)
    ones = to_dtype(inside, self.dtype)
    counts = aten.full.default([bins], 0, dtype=self.dtype, device=self.device)
    return aten.scatter_add.default(counts, 0, b, ones)
