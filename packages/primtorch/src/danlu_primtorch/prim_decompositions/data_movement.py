"""Concatenation, padding, gathers and scatters -> data-movement and indexing prims.

Index tensors are made explicit: int64, negative indices wrapped where eager allows them,
index tensors broadcast to one shape, values broadcast and converted to the target dtype.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import (
    P,
    broadcast_shapes,
    broadcast_to,
    canonical_dim,
    convert,
    full_like_shape,
)
from danlu_primtorch.prim_decompositions.registry import PrimDecompositionUnsupported, register
from danlu_primtorch.type_promotion import result_type

aten = torch.ops.aten


@register(aten.cat.default)
def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat needs a non-empty list of tensors")
    dtype = result_type(*tensors)
    # legacy: 1-d empty tensors are skipped when concatenating tensors of another rank
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    if not kept:
        kept = tensors[:1]
    d = canonical_dim(dim, kept[0].dim())
    return P.cat([convert(t, dtype) for t in kept], d)


@register(aten.constant_pad_nd.default)
def constant_pad_nd(a, pad, value=0):
    if len(pad) % 2 or len(pad) // 2 > a.dim():
        raise RuntimeError(f"padding {list(pad)} does not fit a {a.dim()}-d tensor")
    low, high = [0] * a.dim(), [0] * a.dim()
    for i in range(len(pad) // 2):
        d = a.dim() - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    return P.pad(a, low, high, value)


def _as_long(index):
    return convert(index, torch.int64)


def _wrap(index, size):
    """Negative indices count from the end (eager's advanced indexing does this)."""
    zero = full_like_shape(index, 0)
    return P.where(P.lt(index, zero), P.add(index, full_like_shape(index, size)), index)


@register(aten.gather.default)
def gather(a, dim, index, *, sparse_grad=False):
    d = canonical_dim(dim, a.dim())
    return P.gather(a, d, _as_long(index))


def _scatter_src(a, src):
    if src.dtype != a.dtype:
        raise RuntimeError(f"scatter: src dtype {src.dtype} must equal self's {a.dtype}")
    return src


@register(aten.scatter.src)
def scatter_src(a, dim, index, src):
    return P.scatter(a, canonical_dim(dim, a.dim()), _as_long(index), _scatter_src(a, src))


@register(aten.scatter.value)
def scatter_value(a, dim, index, value):
    src = P.full(list(index.shape), value, dtype=a.dtype, device=a.device)
    return P.scatter(a, canonical_dim(dim, a.dim()), _as_long(index), src)


@register(aten.scatter_add.default)
def scatter_add(a, dim, index, src):
    return P.scatter_reduce(
        a, canonical_dim(dim, a.dim()), _as_long(index), _scatter_src(a, src), "sum", True
    )


@register(aten.scatter_reduce.two)
def scatter_reduce(a, dim, index, src, reduce, *, include_self=True):
    return P.scatter_reduce(
        a,
        canonical_dim(dim, a.dim()),
        _as_long(index),
        _scatter_src(a, src),
        reduce,
        include_self,
    )


@register(aten.index_select.default)
def index_select(a, dim, index):
    d = canonical_dim(dim, a.dim())
    index = _as_long(index)
    if index.dim() == 0:
        index = P.reshape(index, [1])
    return P.index_select(a, d, index)


def _explicit_indices(a, indices):
    """Index tensors as int64 of one broadcast shape with negatives wrapped; None kept."""
    indices = list(indices)
    for i in indices:
        if i is not None and i.dtype in (torch.bool, torch.uint8):
            raise PrimDecompositionUnsupported(
                "boolean-mask indexing has a data-dependent shape; keep aten.index"
            )
    while indices and indices[-1] is None:
        indices.pop()
    present = [i for i in indices if i is not None]
    if not present:
        raise PrimDecompositionUnsupported("indexing with no index tensor")
    shape = broadcast_shapes(*(list(i.shape) for i in present))
    out = []
    for d, i in enumerate(indices):
        if i is None:
            out.append(None)
        else:
            out.append(_wrap(broadcast_to(_as_long(i), shape), a.shape[d]))
    return out


@register(aten.index.Tensor)
def index(a, indices):
    return P.index(a, _explicit_indices(a, indices))


@register(aten.index_put.default)
def index_put(a, indices, values, accumulate=False):
    idx = _explicit_indices(a, indices)
    shape = _indexed_shape(a, idx)
    v = broadcast_to(convert(values, a.dtype), shape)
    return P.index_put(a, idx, v, bool(accumulate))


def _indexed_shape(a, idx):
    idx_shape = next(list(i.shape) for i in idx if i is not None)
    present = [k for k, i in enumerate(idx) if i is not None]
    rest = [a.shape[k] for k in range(a.dim()) if k >= len(idx) or idx[k] is None]
    if present == list(range(present[0], present[-1] + 1)):
        return rest[: present[0]] + idx_shape + rest[present[0] :]
    return idx_shape + rest
