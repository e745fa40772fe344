"""Searching, membership, distances, cross products, unpooling and whole-tensor predicates."""

from __future__ import annotations

import math

import torch

from danlu_primtorch.decompositions._helpers import iota, to_dtype, where, wrap_dim, zeros
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


@register(aten.isin.Tensor_Tensor)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    flat = aten.view.default(test_elements, [-1])
    hit = aten.any.dims(aten.eq.Tensor(aten.unsqueeze.default(elements, -1), flat), [-1], False)
    return aten.logical_not.default(hit) if invert else hit


@register(aten.isin.Tensor_Scalar)
def isin_tensor_scalar(elements, test_element, *, assume_unique=False, invert=False):
    hit = aten.eq.Scalar(elements, test_element)
    return aten.logical_not.default(hit) if invert else hit


@register(aten.isin.Scalar_Tensor)
def isin_scalar_tensor(element, test_elements, *, assume_unique=False, invert=False):
    hit = aten.any.dims(aten.eq.Scalar(test_elements, element), None, False)
    return aten.logical_not.default(hit) if invert else hit


def _count_below(seq, values, right):
    """How many entries of each sorted row lie left of each value (NaN values sort last)."""
    s = aten.unsqueeze.default(seq, -2)  # [..., 1, M]
    v = aten.unsqueeze.default(values, -1)  # [..., K, 1]
    # written as "not (s >= v)" / "not (s > v)" so a NaN value counts every entry, as ATen does
    left = aten.logical_not.default(aten.gt.Tensor(s, v) if right else aten.ge.Tensor(s, v))
    return aten.sum.dim_IntList(left, [-1], False, dtype=torch.int64)


@register(aten.searchsorted.Tensor)
def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    if side is not None:
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = aten.gather.default(seq, -1, sorter)
    if seq.dim() == 1:
        out = _count_below(seq, aten.view.default(self, [-1]), right)
        out = aten.view.default(out, list(self.shape))
    else:
        out = _count_below(seq, self, right)
    return to_dtype(out, torch.int32 if out_int32 else torch.int64)


@register(aten.searchsorted.Scalar)
def searchsorted_scalar(
    sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None
):
    v = aten.scalar_tensor.default(self, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    if sorted_sequence.dim() > 1:
        v = aten.expand.default(v, list(sorted_sequence.shape[:-1]) + [1])
    return searchsorted(
        sorted_sequence, v, out_int32=out_int32, right=right, side=side, sorter=sorter
    )


@register(aten.bucketize.Tensor)
def bucketize(self, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, self, out_int32=out_int32, right=right)


@register(aten.bucketize.Scalar)
def bucketize_scalar(self, boundaries, *, out_int32=False, right=False):
    return searchsorted_scalar(boundaries, self, out_int32=out_int32, right=right)


@register(aten.linalg_cross.default)
def linalg_cross(self, other, *, dim=-1):
    shape = torch.broadcast_shapes(self.shape, other.shape)
    a, b = aten.expand.default(self, list(shape)), aten.expand.default(other, list(shape))
    d = wrap_dim(dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {shape[d]} and {shape[d]}"
        )

    def comp(x, i):
        return aten.select.int(x, d, i)

    c0 = aten.sub.Tensor(
        aten.mul.Tensor(comp(a, 1), comp(b, 2)), aten.mul.Tensor(comp(a, 2), comp(b, 1))
    )
    c1 = aten.sub.Tensor(
        aten.mul.Tensor(comp(a, 2), comp(b, 0)), aten.mul.Tensor(comp(a, 0), comp(b, 2))
    )
    c2 = aten.sub.Tensor(
        aten.mul.Tensor(comp(a, 0), comp(b, 1)), aten.mul.Tensor(comp(a, 1), comp(b, 0))
    )
    return aten.stack.default([c0, c1, c2], d)


def _pnorm_last(diff, p):
    a = aten.abs.default(diff)
    if p == 0:
        return aten.sum.dim_IntList(to_dtype(aten.ne.Scalar(a, 0), a.dtype), [-1], False)
    if p == 1:
        return aten.sum.dim_IntList(a, [-1], False)
    if p == 2:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(a, a), [-1], False))
    if math.isinf(p):
        return aten.amax.default(a, [-1], False)
    return aten.pow.Tensor_Scalar(
        aten.sum.dim_IntList(aten.pow.Tensor_Scalar(a, p), [-1], False), 1.0 / p
    )


@register(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode=None):
    # direct differences (exact), whatever compute_mode asks: the mm trick trades accuracy for speed
    diff = aten.sub.Tensor(aten.unsqueeze.default(x1, -2), aten.unsqueeze.default(x2, -3))
    return _pnorm_last(diff, p)


@register(aten._pdist_forward.default)
def pdist_forward(self, p=2.0):
    n = self.shape[0]
    rows = [(i, j) for i in range(n) for j in range(i + 1, n)]
    if not rows:
        return aten.full.default([0], 0, dtype=self.dtype, device=self.device)
    # pair (i, j) with i < j in row-major order: i from a running count, j = i + 1 + offset
    k = iota(len(rows), self)
    # i is the largest r with r*n - r*(r+1)/2 <= k; found by counting row starts <= k
    starts = iota(n, self)
    row_start = aten.sub.Tensor(
        aten.mul.Tensor(starts, n),
        aten.div.Tensor_mode(
            aten.mul.Tensor(starts, aten.add.Tensor(starts, 1)), 2, rounding_mode="floor"
        ),
    )
    i = aten.sub.Tensor(
        aten.sum.dim_IntList(
            aten.le.Tensor(aten.unsqueeze.default(row_start, 0), aten.unsqueeze.default(k, 1)),
            [1],
            False,
            dtype=torch.int64,
        ),
        1,
    )
    j = aten.add.Tensor(
        aten.add.Tensor(aten.sub.Tensor(k, aten.index_select.default(row_start, 0, i)), i), 1
    )
    diff = aten.sub.Tensor(
        aten.index_select.default(self, 0, i), aten.index_select.default(self, 0, j)
    )
    return _pnorm_last(diff, p)


@register(aten.renorm.default)
def renorm(self, p, dim, maxnorm):
    dim = wrap_dim(dim, self.dim())
    others = [d for d in range(self.dim()) if d != dim]
    norm = aten.linalg_vector_norm.default(self, p, others, True)
    factor = where(
        aten.gt.Scalar(norm, maxnorm), aten.div.Tensor(maxnorm, aten.add.Tensor(norm, 1e-7)), 1.0
    )
    return aten.mul.Tensor(self, to_dtype(factor, self.dtype))


def _unpool(self, indices, output_size):
    n = len(output_size)
    lead = list(self.shape[: self.dim() - n])
    plane = 1
    for s in output_size:
        plane *= s
    m = 1
    for s in self.shape[self.dim() - n :]:
        m *= s
    vals = aten.view.default(
        aten.clone.default(self, memory_format=torch.contiguous_format), lead + [m]
    )
    idx = aten.view.default(
        aten.clone.default(indices, memory_format=torch.contiguous_format), lead + [m]
    )
    out = aten.scatter.src(zeros(lead + [plane], self), len(lead), idx, vals)
    return aten.view.default(out, lead + list(output_size))


@register(aten.max_unpool2d.default)
def max_unpool2d(self, indices, output_size):
    return _unpool(self, indices, output_size)


@register(aten.max_unpool3d.default)
def max_unpool3d(self, indices, output_size, stride, padding):
    return _unpool(self, indices, output_size)


@register(aten.equal.default)
def equal(self, other):
    if self.shape != other.shape:
        return False
    return bool(
        aten._local_scalar_dense.default(aten.all.dims(aten.eq.Tensor(self, other), None, False))
    )


@register(aten.allclose.default)
def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = aten.le.Tensor(
        aten.abs.default(aten.sub.Tensor(self, other)),
        aten.add.Tensor(aten.mul.Tensor(aten.abs.default(other), rtol), atol),
    )
    close = aten.logical_or.default(close, aten.eq.Tensor(self, other))
    if equal_nan:
        close = aten.logical_or.default(
            close, aten.logical_and.default(aten.isnan.default(self), aten.isnan.default(other))
        )
    return bool(aten._local_scalar_dense.default(aten.all.dims(close, None, False)))


@register(aten.mvlgamma.default)
def mvlgamma(self, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = self if self.dtype.is_floating_point else to_dtype(self, torch.get_default_dtype())
    j = aten.view.default(iota(p, x, dtype=x.dtype), [p] + [1] * x.dim())
    terms = aten.lgamma.default(
        aten.sub.Tensor(aten.unsqueeze.default(x, 0), aten.div.Tensor(j, 2))
    )
    const = p * (p - 1) / 4 * math.log(math.pi)
    return aten.add.Tensor(aten.sum.dim_IntList(terms, [0], False), const)
