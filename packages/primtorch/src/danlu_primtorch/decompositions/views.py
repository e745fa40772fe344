"""Views and shape ops: transposes, squeezes, splits, stacking, flips, rolls, repeats, triangles.

Views are written with the canonical view ops (``view``, ``permute``, ``expand``, ``slice``,
``select``, ``squeeze.dims``, ``unsqueeze``, ``as_strided``, ``alias``) so that they still alias
their input; ``*_copy`` variants are the view followed by ``clone``.
"""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import iota, promote, where, wrap_dim, wrap_dims
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


@register(aten._unsafe_view.default)
def unsafe_view(self, size):
    return aten.view.default(self, size)


@register(aten.detach.default, aten.lift_fresh.default)
def detach(self):
    return aten.alias.default(self)


@register(aten.t.default)
def t(self):
    if self.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
    return aten.permute.default(self, list(range(self.dim()))[::-1])


@register(aten.transpose.int)
def transpose(self, dim0, dim1):
    n = self.dim()
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    perm = list(range(n))
    if n:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return aten.permute.default(self, perm)


@register(aten.squeeze.default)
def squeeze(self):
    return aten.squeeze.dims(self, [d for d in range(self.dim()) if self.shape[d] == 1])


@register(aten.squeeze.dim)
def squeeze_dim(self, dim):
    return aten.squeeze.dims(self, [dim])


@register(aten.split.Tensor, aten.unsafe_split.Tensor)
def split(self, split_size, dim=0):
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    if split_size == 0 and n != 0:
        raise RuntimeError("split_size can only be 0 if dimension size is 0")
    if not split_size:
        return split_with_sizes(self, [0], dim)
    # The number of outputs must be a Python int; with a symbolic size that guards the count
    # only, and the last piece stays symbolic.
    chunks = max(int((n + split_size - 1) // split_size), 1)
    sizes = [split_size] * (chunks - 1) + [n - split_size * (chunks - 1)]
    return split_with_sizes(self, sizes, dim)


@register(aten.split_with_sizes.default, aten.unsafe_split_with_sizes.default)
def split_with_sizes(self, split_sizes, dim=0):
    dim = wrap_dim(dim, self.dim())
    if sum(split_sizes) != self.shape[dim]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {self.shape[dim]}, got {split_sizes}"
        )
    out, start = [], 0
    for s in split_sizes:
        out.append(aten.slice.Tensor(self, dim, start, start + s))
        start += s
    return out


@register(aten.unbind.int)
def unbind(self, dim=0):
    dim = wrap_dim(dim, self.dim())
    return [aten.select.int(self, dim, i) for i in range(self.shape[dim])]


@register(aten.stack.default)
def stack(tensors, dim=0):
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    dim = wrap_dim(dim, tensors[0].dim() + 1)
    for t_ in tensors[1:]:
        if t_.shape != tensors[0].shape:
            raise RuntimeError("stack expects each tensor to be equal size")
    return aten.cat.default([aten.unsqueeze.default(t_, dim) for t_ in tensors], dim)


def narrow(self, dim, start, length):
    dim = wrap_dim(dim, self.dim())
    if start < 0:
        start += self.shape[dim]
    return aten.slice.Tensor(self, dim, start, start + length)


@register(aten.diagonal.default)
def diagonal(self, offset=0, dim1=0, dim2=1):
    n = self.dim()
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError("diagonal dimensions cannot be identical")
    size, stride = list(self.shape), list(self.stride())
    off = self.storage_offset()
    if offset >= 0:
        length = max(0, min(size[d1], size[d2] - offset))
        if length:
            off += offset * stride[d2]
    else:
        length = max(0, min(size[d1] + offset, size[d2]))
        if length:
            off -= offset * stride[d1]
    keep = [d for d in range(n) if d not in (d1, d2)]
    return aten.as_strided.default(
        self,
        [size[d] for d in keep] + [length],
        [stride[d] for d in keep] + [stride[d1] + stride[d2]],
        off,
    )


@register(aten.unfold.default)
def unfold(self, dimension, size, step):
    n = self.dim()
    d = wrap_dim(dimension, n) if n else 0
    length = self.shape[d] if n else 1
    if size > length:
        raise RuntimeError(
            f"maximum size for tensor at dimension {d} is {length} but size is {size}"
        )
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape, stride = list(self.shape), list(self.stride())
    if n == 0:
        return aten.as_strided.default(self, [size], [1], self.storage_offset())
    count = (length - size) // step + 1
    new_shape = shape[:d] + [count] + shape[d + 1 :] + [size]
    new_stride = stride[:d] + [stride[d] * step] + stride[d + 1 :] + [stride[d]]
    return aten.as_strided.default(self, new_shape, new_stride, self.storage_offset())


# --- *_copy variants: the view, materialised.
def _copy_of(view_fn):
    def copy_fn(self, *args, **kwargs):
        out = view_fn(self, *args, **kwargs)
        if isinstance(out, (list, tuple)):
            return [aten.clone.default(o) for o in out]
        return aten.clone.default(out)

    copy_fn.__name__ = view_fn.__name__ + "_copy"
    return copy_fn


def _canonical_view(op):
    return lambda self, *args, **kwargs: op(self, *args, **kwargs)


for _op, _view in (
    (aten.view_copy.default, _canonical_view(aten.view.default)),
    (aten.permute_copy.default, _canonical_view(aten.permute.default)),
    (aten.expand_copy.default, _canonical_view(aten.expand.default)),
    (aten.alias_copy.default, _canonical_view(aten.alias.default)),
    (aten.as_strided_copy.default, _canonical_view(aten.as_strided.default)),
    (aten.slice_copy.Tensor, _canonical_view(aten.slice.Tensor)),
    (aten.select_copy.int, _canonical_view(aten.select.int)),
    (aten.unsqueeze_copy.default, _canonical_view(aten.unsqueeze.default)),
    (aten.squeeze_copy.default, squeeze),
    (aten.squeeze_copy.dim, squeeze_dim),
    (aten.squeeze_copy.dims, _canonical_view(aten.squeeze.dims)),
    (aten.t_copy.default, t),
    (aten.transpose_copy.int, transpose),
    (aten.diagonal_copy.default, diagonal),
    (aten.unfold_copy.default, unfold),
    (aten.unbind_copy.int, unbind),
    (aten.split_copy.Tensor, split),
    (aten.split_with_sizes_copy.default, split_with_sizes),
    (aten.narrow_copy.default, narrow),
    (aten.detach_copy.default, detach),
    (aten._unsafe_view.default, None),
):
    if _view is not None:
        register(_op)(_copy_of(_view))


@register(aten.flip.default)
def flip(self, dims):
    out = self
    for d in wrap_dims(dims, self.dim()):
        n = self.shape[d]
        out = aten.index_select.default(out, d, iota(n, self, start=n - 1, step=-1))
    return out if dims else aten.clone.default(self)


@register(aten.roll.default)
def roll(self, shifts, dims=()):
    if not dims:
        flat = aten.view.default(aten.clone.default(self), [-1])
        return aten.view.default(roll(flat, shifts, [0]), list(self.shape))
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    out = self
    for s, d in zip(shifts, dims):
        d = wrap_dim(d, self.dim())
        n = self.shape[d]
        if n == 0:
            continue
        idx = aten.remainder.Tensor(
            iota(n, self, start=-s), aten.scalar_tensor.default(n, dtype=torch.int64)
        )
        out = aten.index_select.default(out, d, idx)
    return out if out is not self else aten.clone.default(self)


@register(aten.repeat.default)
def repeat(self, repeats):
    if len(repeats) < self.dim():
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    lead = len(repeats) - self.dim()
    shape = [1] * lead + list(self.shape)
    x = aten.view.default(self, shape)
    # interleave a size-r dim before each dim, expand, then merge pairs
    inter, expanded, final = [], [], []
    for r, s in zip(repeats, shape):
        inter += [1, s]
        expanded += [r, s]
        final.append(r * s)
    x = aten.view.default(x, inter)
    x = aten.expand.default(x, expanded)
    return aten.view.default(aten.clone.default(x, memory_format=torch.contiguous_format), final)


def _tri_mask(self, diagonal, upper):
    rows, cols = self.shape[-2], self.shape[-1]
    r = aten.unsqueeze.default(iota(rows, self), 1)
    c = aten.unsqueeze.default(iota(cols, self), 0)
    d = aten.sub.Tensor(c, r)
    return aten.ge.Scalar(d, diagonal) if upper else aten.le.Scalar(d, diagonal)


@register(aten.tril.default)
def tril(self, diagonal=0):
    if self.dim() < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return where(
        _tri_mask(self, diagonal, False), self, aten.scalar_tensor.default(0, dtype=self.dtype)
    )


@register(aten.triu.default)
def triu(self, diagonal=0):
    if self.dim() < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return where(
        _tri_mask(self, diagonal, True), self, aten.scalar_tensor.default(0, dtype=self.dtype)
    )


@register(aten.rot90.default)
def rot90(self, k=1, dims=(0, 1)):
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if self.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.dim()}")
    d0, d1 = wrap_dim(dims[0], self.dim()), wrap_dim(dims[1], self.dim())
    if d0 == d1:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}"
        )
    k %= 4
    if k == 1:
        return transpose(flip(self, [d1]), d0, d1)
    if k == 2:
        return flip(self, [d0, d1])
    if k == 3:
        return flip(transpose(self, d0, d1), [d1])
    return aten.clone.default(self)


@register(aten.pixel_shuffle.default)
def pixel_shuffle(self, upscale_factor):
    r = upscale_factor
    *batch, c, h, w = self.shape
    oc = c // (r * r)
    x = aten.view.default(self, [*batch, oc, r, r, h, w])
    n = len(batch)
    perm = list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2]
    x = aten.permute.default(x, perm)
    return aten.view.default(
        aten.clone.default(x, memory_format=torch.contiguous_format), [*batch, oc, h * r, w * r]
    )


@register(aten.pixel_unshuffle.default)
def pixel_unshuffle(self, downscale_factor):
    r = downscale_factor
    *batch, c, h, w = self.shape
    x = aten.view.default(self, [*batch, c, h // r, r, w // r, r])
    n = len(batch)
    perm = list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]
    x = aten.permute.default(x, perm)
    return aten.view.default(
        aten.clone.default(x, memory_format=torch.contiguous_format),
        [*batch, c * r * r, h // r, w // r],
    )


@register(aten.channel_shuffle.default, aten.native_channel_shuffle.default)
def channel_shuffle(self, groups):
    b, c, *rest = self.shape
    x = aten.view.default(self, [b, groups, c // groups, *rest])
    x = aten.permute.default(x, [0, 2, 1] + list(range(3, x.dim())))
    return aten.view.default(
        aten.clone.default(x, memory_format=torch.contiguous_format), list(self.shape)
    )


@register(aten.diag_embed.default)
def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    n = self.dim() + 1
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    last = self.shape[-1]
    size = last + abs(offset)
    # out[..., i, j] = self[..., i - max(0,-offset)] where j - i == offset
    r = iota(size, self)
    rr, cc = aten.unsqueeze.default(r, 1), aten.unsqueeze.default(r, 0)
    mask = aten.eq.Tensor(
        aten.sub.Tensor(cc, rr), aten.scalar_tensor.default(offset, dtype=torch.int64)
    )
    src_idx = aten.clamp.default(aten.sub.Tensor(r, max(0, -offset)), 0, max(last - 1, 0))
    if offset > 0:
        src_idx = aten.clamp.default(r, 0, max(last - 1, 0))
    vals = aten.index_select.default(self, self.dim() - 1, src_idx) if last else self
    # vals[..., k] for k indexing the row (offset<=0) or the row (offset>0): rows carry the value
    vals = aten.unsqueeze.default(vals, -1)  # [..., size, 1]
    zero = aten.scalar_tensor.default(0, dtype=self.dtype)
    out = where(mask, vals, zero)  # [..., size, size] with rows = dim1, cols = dim2
    # move the two new trailing dims to dim1/dim2
    rest = list(range(n - 2))
    perm, it = [0] * n, iter(rest)
    for d in range(n):
        if d == d1:
            perm[d] = n - 2
        elif d == d2:
            perm[d] = n - 1
        else:
            perm[d] = next(it)
    return aten.permute.default(out, perm)


@register(aten.block_diag.default)
def block_diag(tensors):
    mats = []
    for t_ in tensors:
        if t_.dim() == 0:
            t_ = aten.view.default(t_, [1, 1])
        elif t_.dim() == 1:
            t_ = aten.unsqueeze.default(t_, 0)
        mats.append(t_)
    rows = sum(m.shape[0] for m in mats)
    cols = sum(m.shape[1] for m in mats)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = promote(dtype, m.dtype)
    out_rows, c0 = [], 0
    for m in mats:
        m = aten._to_copy.default(m, dtype=dtype) if m.dtype != dtype else m
        out_rows.append(aten.constant_pad_nd.default(m, [c0, cols - c0 - m.shape[1], 0, 0], 0))
        c0 += m.shape[1]
    if not out_rows:
        return aten.full.default([0, 0], 0, dtype=torch.float32)
    out = aten.cat.default(out_rows, 0)
    assert out.shape[0] == rows
    return out
