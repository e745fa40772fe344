"""Indexing, masking and scatter-style ops, and the backward ops of views (which scatter)."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import iota, to_dtype, where, wrap_dim, zeros
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _flat(t):
    """`t` as 1-D; indices are often expanded (position ids), which no view can flatten."""
    if not t.is_contiguous():
        t = aten.clone.default(t, memory_format=torch.contiguous_format)
    return aten.view.default(t, [-1])


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if indices.dim() == 1:
        return aten.index_select.default(weight, 0, indices)
    flat = aten.index_select.default(weight, 0, _flat(indices))
    return aten.view.default(flat, [*indices.shape, weight.shape[1]])


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = grad_output.shape[-1]
    idx = _flat(indices)
    g = (
        aten.view.default(grad_output, [-1, d])
        if grad_output.is_contiguous()
        else aten.view.default(
            aten.clone.default(grad_output, memory_format=torch.contiguous_format), [-1, d]
        )
    )
    if padding_idx >= 0:
        g = where(aten.unsqueeze.default(aten.eq.Scalar(idx, padding_idx), 1), 0, g)
    if scale_grad_by_freq:
        counts = aten.index_put.default(
            zeros([num_weights], g, dtype=torch.int64),
            [idx],
            aten.full.default([], 1, dtype=torch.int64, device=g.device),
            True,
        )
        g = aten.div.Tensor(g, aten.unsqueeze.default(aten.index_select.default(counts, 0, idx), 1))
    out = zeros([num_weights, d], g)
    return aten.index_put.default(out, [idx], g, True)


@register(aten.masked_fill.Scalar)
def masked_fill_scalar(self, mask, value):
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}"
        )
    v = aten.scalar_tensor.default(value, dtype=self.dtype, device=self.device)
    return aten.where.self(mask, v, self)


@register(aten.masked_fill.Tensor)
def masked_fill_tensor(self, mask, value):
    if value.dim() != 0:
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.dim()} dimension(s)."
        )
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}"
        )
    return aten.where.self(mask, to_dtype(value, self.dtype), self)


def _index_along(dim, ndim, index):
    """An ``index_put`` index list addressing ``index`` along ``dim``."""
    return [None] * dim + [index]


@register(aten.index_add.default)
def index_add(self, dim, index, source, *, alpha=1):
    dim = wrap_dim(dim, self.dim())
    if alpha != 1:
        source = aten.mul.Tensor(source, alpha)
    if self.dim() == 0:
        return aten.add.Tensor(
            self,
            aten.sum.dim_IntList(aten.view.default(source, [-1]), [0], False, dtype=self.dtype),
        )
    return aten.index_put.default(self, _index_along(dim, self.dim(), index), source, True)


@register(aten.index_copy.default)
def index_copy(self, dim, index, source):
    dim = wrap_dim(dim, self.dim())
    if self.dim() == 0:
        return aten.clone.default(aten.view.default(source, []))
    return aten.index_put.default(self, _index_along(dim, self.dim(), index), source, False)


@register(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(self, dim, index, value):
    dim = wrap_dim(dim, self.dim())
    v = (
        value
        if isinstance(value, torch.Tensor)
        else aten.scalar_tensor.default(value, dtype=self.dtype)
    )
    v = to_dtype(v, self.dtype)
    if self.dim() == 0:
        return aten.clone.default(v) if index.numel() else aten.clone.default(self)
    return aten.index_put.default(self, _index_along(dim, self.dim(), _flat(index)), v, False)


@register(aten.take.default)
def take(self, index):
    flat = aten.view.default(aten.clone.default(self, memory_format=torch.contiguous_format), [-1])
    n = flat.shape[0]
    idx = where(aten.lt.Scalar(index, 0), aten.add.Tensor(index, n), index)
    return aten.view.default(
        aten.index_select.default(flat, 0, aten.view.default(idx, [-1])), list(index.shape)
    )


@register(aten.put.default)
def put(self, index, source, accumulate=False):
    flat = aten.view.default(aten.clone.default(self, memory_format=torch.contiguous_format), [-1])
    n = flat.shape[0]
    idx = where(aten.lt.Scalar(index, 0), aten.add.Tensor(index, n), index)
    out = aten.index_put.default(
        flat, [aten.view.default(idx, [-1])], aten.view.default(source, [-1]), accumulate
    )
    return aten.view.default(out, list(self.shape))


@register(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(self, dim, index, src, *, reduce):
    if not isinstance(src, torch.Tensor):
        src = aten.full.default(list(index.shape), src, dtype=self.dtype, device=self.device)
    mode = {"add": "sum", "multiply": "prod"}[reduce]
    return aten.scatter_reduce.two(self, dim, index, src, mode, include_self=True)


@register(aten._unsafe_index.Tensor)
def unsafe_index(self, indices):
    return aten.index.Tensor(self, indices)


@register(aten._unsafe_index_put.default)
def unsafe_index_put(self, indices, values, accumulate=False):
    return aten.index_put.default(self, indices, values, accumulate)


@register(aten._unsafe_masked_index.default)
def unsafe_masked_index(self, mask, indices, fill):
    safe = []
    for idx in indices:
        safe.append(None if idx is None else where(mask, idx, 0))
    vals = aten.index.Tensor(self, safe)
    return where(mask, vals, aten.scalar_tensor.default(fill, dtype=self.dtype, device=self.device))


@register(aten._unsafe_masked_index_put_accumulate.default)
def unsafe_masked_index_put_accumulate(self, mask, indices, values):
    safe = [None if idx is None else where(mask, idx, 0) for idx in indices]
    vals = where(
        mask, values, aten.scalar_tensor.default(0, dtype=values.dtype, device=values.device)
    )
    return aten.index_put.default(self, safe, vals, True)


@register(aten.masked_scatter.default)
def masked_scatter(self, mask, source):
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}"
        )
    shape = [
        max(a, b)
        for a, b in zip(
            [1] * (mask.dim() - self.dim()) + list(self.shape),
            [1] * (self.dim() - mask.dim()) + list(mask.shape),
        )
    ]
    x = aten.expand.default(self, shape)
    m = aten.expand.default(mask, shape)
    flat_m = aten.view.default(aten.clone.default(m, memory_format=torch.contiguous_format), [-1])
    # the k-th True element takes source[k]: its rank is a cumsum of the mask
    rank = aten.sub.Tensor(aten.cumsum.default(flat_m, 0, dtype=torch.int64), 1)
    src = aten.view.default(aten.clone.default(source, memory_format=torch.contiguous_format), [-1])
    if src.shape[0] == 0:
        return aten.clone.default(x, memory_format=torch.contiguous_format)
    rank = aten.clamp.default(rank, 0, src.shape[0] - 1)
    taken = aten.view.default(aten.index_select.default(src, 0, rank), shape)
    return where(m, taken, x)


@register(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad_output, mask, sizes):
    numel = 1
    for s in sizes:
        numel *= s
    m = aten.view.default(
        aten.clone.default(
            aten.expand.default(mask, list(grad_output.shape)),
            memory_format=torch.contiguous_format,
        ),
        [-1],
    )
    g = aten.view.default(
        aten.clone.default(grad_output, memory_format=torch.contiguous_format), [-1]
    )
    rank = aten.sub.Tensor(aten.cumsum.default(m, 0, dtype=torch.int64), 1)
    # positions that are not selected go to a dump slot at index `numel`
    dest = where(m, rank, numel)
    out = aten.index_put.default(zeros([numel + 1], g), [dest], g, True)
    return aten.view.default(aten.slice.Tensor(out, 0, 0, numel), list(sizes))


# --- scatter into a base: the inverse of a view, and the backward ops of views.
@register(aten.select_scatter.default)
def select_scatter(self, src, dim, index):
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    index = index + n if index < 0 else index
    mask_shape = [1] * self.dim()
    mask_shape[dim] = n
    mask = aten.view.default(aten.eq.Scalar(iota(n, self), index), mask_shape)
    return where(mask, aten.unsqueeze.default(src, dim), self)


@register(aten.slice_scatter.default)
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    start, end = _slice_bounds(n, start, end)
    if end <= start or src.numel() == 0:
        return aten.clone.default(self)
    if step == 1:
        # src padded out to self's extent, chosen inside [start, end): elementwise, where an
        # index_put would be a scatter a compiler cannot fuse
        inside = aten.logical_and.default(
            aten.ge.Scalar(iota(n, self), start), aten.lt.Scalar(iota(n, self), end)
        )
        inside = aten.view.default(inside, [1] * dim + [n] + [1] * (self.dim() - dim - 1))
        return where(inside, _pad_along(src, dim, start, n - end), self)
    idx = iota(src.shape[dim], self, start=start, step=step)
    return aten.index_put.default(self, [None] * dim + [idx], src, False)


def _slice_bounds(n, start, end):
    """A slice's ``start``/``end`` (None or negative allowed) as positions in ``[0, n]``."""
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    return max(0, min(start, n)), max(0, min(end, n))


def _pad_along(t, dim, before, after):
    """``t`` with ``before`` zeros ahead of it and ``after`` behind it along ``dim``."""
    return aten.constant_pad_nd.default(t, [0, 0] * (t.dim() - dim - 1) + [before, after], 0)


@register(aten.diagonal_scatter.default)
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    n = aten.diagonal.default(self, offset, dim1, dim2).shape[-1]
    d1, d2 = wrap_dim(dim1, self.dim()), wrap_dim(dim2, self.dim())
    i = iota(n, self, start=max(0, -offset))
    j = iota(n, self, start=max(0, offset))
    # move dim1/dim2 to the front so an index_put can address them
    perm = [d1, d2] + [d for d in range(self.dim()) if d not in (d1, d2)]
    inv = [perm.index(d) for d in range(self.dim())]
    base = aten.permute.default(self, perm)
    vals = aten.permute.default(src, [src.dim() - 1] + list(range(src.dim() - 1)))
    res = aten.index_put.default(base, [i, j], vals, False)
    return aten.permute.default(res, inv)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    # scatter into a contiguous copy through the flat positions the strided view addresses
    base = aten.clone.default(self, memory_format=torch.contiguous_format)
    flat = aten.view.default(base, [-1])
    pos = aten.full.default(
        [], 0 if storage_offset is None else storage_offset, dtype=torch.int64, device=self.device
    )
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = aten.add.Tensor(pos, aten.view.default(aten.mul.Tensor(iota(n, self), st), shape))
    pos = aten.expand.default(pos, list(size)) if size else pos
    out = aten.index_put.default(
        flat,
        [aten.view.default(pos, [-1])],
        aten.view.default(aten.clone.default(src, memory_format=torch.contiguous_format), [-1]),
        False,
    )
    return aten.view.default(out, list(self.shape))


@register(aten.select_backward.default)
def select_backward(grad_output, input_sizes, dim, index):
    return select_scatter(zeros(input_sizes, grad_output), grad_output, dim, index)


@register(aten.slice_backward.default)
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    dim = wrap_dim(dim, len(input_sizes))
    n = input_sizes[dim]
    start, end = _slice_bounds(n, start, end)
    if step == 1 and end > start and grad_output.shape[dim] == end - start:
        return _pad_along(grad_output, dim, start, n - end)  # zeros around the gradient
    return slice_scatter(zeros(input_sizes, grad_output), grad_output, dim, start, end, step)


@register(aten.diagonal_backward.default)
def diagonal_backward(grad_output, input_sizes, offset, dim1, dim2):
    return diagonal_scatter(zeros(input_sizes, grad_output), grad_output, offset, dim1, dim2)


@register(aten.unfold_backward.default)
def unfold_backward(grad_in, input_sizes, dim, size, step):
    nd = len(input_sizes)
    if nd == 0:
        return aten.sum.dim_IntList(grad_in, [0], False)
    dim = wrap_dim(dim, nd)
    count = grad_in.shape[dim]
    # window w, element k lands at position w * step + k along `dim`
    pos = aten.add.Tensor(
        aten.unsqueeze.default(iota(count, grad_in, step=step), 1),
        aten.unsqueeze.default(iota(size, grad_in), 0),
    )
    # grad_in: [..., count (at dim), ..., size]; move `dim` and the window dim to the front
    g = aten.permute.default(
        grad_in, [dim, grad_in.dim() - 1] + [d for d in range(grad_in.dim() - 1) if d != dim]
    )
    out = zeros([input_sizes[dim]] + [s for d, s in enumerate(input_sizes) if d != dim], grad_in)
    out = aten.index_put.default(out, [pos], g, True)
    back = list(range(1, nd))
    back.insert(dim, 0)
    return aten.permute.default(out, back)
