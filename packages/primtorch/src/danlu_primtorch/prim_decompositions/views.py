"""View canonical ops -> view prims (ATen's defaults, negative dims and -1 sizes resolved)."""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import P, canonical_dim
from danlu_primtorch.prim_decompositions.registry import register
from danlu_primtorch.prims.strides import view_strides

aten = torch.ops.aten


def infer_size(shape, numel):
    """Resolve one -1 in shape against numel, checking the element count."""
    shape = list(shape)
    holes = [i for i, s in enumerate(shape) if s == -1]
    if len(holes) > 1:
        raise RuntimeError(f"only one dimension can be inferred in {shape}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if holes:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape {shape} is invalid for input of size {numel}")
        shape[holes[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape {shape} is invalid for input of size {numel}")
    return shape


@register(aten.view.default)
def view(a, size):
    shape = infer_size(size, a.numel())
    if view_strides(a.shape, a.stride(), shape) is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride; use reshape"
        )
    return P.reshape(a, shape)


@register(aten.permute.default)
def permute(a, dims):
    return P.permute(a, [canonical_dim(d, a.dim()) for d in dims])


@register(aten.expand.default)
def expand(a, size, *, implicit=False):
    size = list(size)
    if len(size) < a.dim():
        raise RuntimeError(f"expand: {len(size)} sizes for a {a.dim()}-d tensor")
    offset = len(size) - a.dim()
    shape = []
    for i, s in enumerate(size):
        if s == -1:
            if i < offset:
                raise RuntimeError("expand: -1 is not allowed in a new leading dimension")
            s = a.shape[i - offset]
        shape.append(s)
    return P.broadcast_in_dim(a, shape, list(range(offset, len(shape))))


def _clamp(v, size):
    if v < 0:
        v += size
    return min(max(v, 0), size)


@register(aten.slice.Tensor)
def slice_(a, dim=0, start=None, end=None, step=1):
    d = canonical_dim(dim, a.dim())
    size = a.shape[d]
    lo = 0 if start is None else _clamp(start, size)
    hi = size if end is None else _clamp(end, size)
    if step < 1:
        raise RuntimeError("slice step must be positive")
    return P.slice(a, d, lo, max(hi, lo), step)


@register(aten.select.int)
def select(a, dim, index):
    d = canonical_dim(dim, a.dim())
    size = a.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select: index {index} out of range for dim {d} of size {size}")
    index = index % size
    return P.squeeze(P.slice(a, d, index, index + 1, 1), [d])


@register(aten.unsqueeze.default)
def unsqueeze(a, dim):
    return P.expand_dims(a, [canonical_dim(dim, a.dim() + 1)])


@register(aten.squeeze.dims)
def squeeze_dims(a, dim):
    if a.dim() == 0:
        return P.view_of(a)
    dims = sorted({canonical_dim(d, a.dim()) for d in dim})
    return P.squeeze(a, [d for d in dims if a.shape[d] == 1])


@register(aten.as_strided.default)
def as_strided(a, size, stride, storage_offset=None):
    offset = a.storage_offset() if storage_offset is None else storage_offset
    return P.as_strided(a, list(size), list(stride), offset)


@register(aten.alias.default)
def alias(a):
    return P.view_of(a)
