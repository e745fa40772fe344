"""Indexing prims: gathers and scatters with explicit int64 indices (no masks, no negatives
from the user: indices must be in range; eager raises on out-of-range, backends may not check).

Scatter-like prims are functional: they return a new tensor, ``a`` is not modified.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import canonical_dim, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import (
    contiguous_strides,
    elementwise_strides,
    like_strides,
)

OPS: dict[str, torch._ops.OpOverload] = {}


def _index_dtype(name, index):
    if index.dtype != torch.int64:
        fail(name, f"index must be int64, got {index.dtype}")


def _gather_check(name, a, dim, index):
    _index_dtype(name, index)
    dim = canonical_dim(name, dim, a.dim())
    if index.dim() != a.dim() and not (a.dim() == 0 and index.dim() <= 1):
        fail(name, f"index must have a's rank {a.dim()}, got {index.dim()}")
    return dim


def _gather_meta(a, dim, index):
    _gather_check("gather", a, dim, index)
    return torch.empty_strided(
        index.shape, contiguous_strides(index.shape), dtype=a.dtype, device=a.device
    )


def _gather_impl(a, dim, index):
    _gather_check("gather", a, dim, index)
    return torch.gather(a, dim, index).contiguous()


OPS["gather"] = define_prim(
    "gather(Tensor a, int dim, Tensor index) -> Tensor",
    PrimKind.INDEXING,
    meta=_gather_meta,
    impl=_gather_impl,
    doc="out[i][j][k] = a[index[i][j][k]][j][k] (for dim=0; likewise for other dims).\n\n"
    "index is int64 with a's rank and index.size(d) <= a.size(d) for d != dim; contiguous "
    "output of index's shape and a's dtype.",
)


def _scatter_check(name, a, dim, index, src):
    _gather_check(name, a, dim, index)
    if src.dtype != a.dtype:
        fail(name, f"src dtype {src.dtype} must equal a's {a.dtype}")


def _scatter_out(a):
    # eager's out-of-place scatter is contiguous whatever a's layout
    return torch.empty_strided(a.shape, contiguous_strides(a.shape), dtype=a.dtype, device=a.device)


def _index_put_out(a):
    return torch.empty_strided(
        a.shape, like_strides(a.shape, a.stride()), dtype=a.dtype, device=a.device
    )


def _scatter_meta(a, dim, index, src):
    _scatter_check("scatter", a, dim, index, src)
    return _scatter_out(a)


def _scatter_impl(a, dim, index, src):
    _scatter_check("scatter", a, dim, index, src)
    return torch.scatter(a, dim, index, src)


OPS["scatter"] = define_prim(
    "scatter(Tensor a, int dim, Tensor index, Tensor src) -> Tensor",
    PrimKind.INDEXING,
    meta=_scatter_meta,
    impl=_scatter_impl,
    doc="Copy of a with out[index[i][j]][j] = src[i][j] (dim=0; likewise for other dims).\n\n"
    "Only index's extent of src is read. With repeated indices, which write lands is "
    "unspecified. Contiguous output.",
)

SCATTER_REDUCE_OPS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_meta(a, dim, index, src, reduce, include_self):
    _scatter_check("scatter_reduce", a, dim, index, src)
    if reduce not in SCATTER_REDUCE_OPS:
        fail("scatter_reduce", f"reduce must be one of {SCATTER_REDUCE_OPS}, got {reduce!r}")
    return _scatter_out(a)


def _scatter_reduce_impl(a, dim, index, src, reduce, include_self):
    _scatter_reduce_meta(a, dim, index, src, reduce, include_self)
    return torch.scatter_reduce(a, dim, index, src, reduce, include_self=include_self)


OPS["scatter_reduce"] = define_prim(
    "scatter_reduce(Tensor a, int dim, Tensor index, Tensor src, str reduce, bool include_self)"
    " -> Tensor",
    PrimKind.INDEXING,
    meta=_scatter_reduce_meta,
    impl=_scatter_reduce_impl,
    doc="Copy of a where each out[index[i][j]][j] (dim=0) is reduced with src[i][j].\n\n"
    "reduce is sum (scatter_add), prod, mean, amax or amin; include_self says whether a's "
    "value takes part; positions no index hits keep a's value. mean divides by the count "
    "(integer mean floors). Floating sums may associate in any order. Contiguous output.",
)


def _index_select_check(a, dim, index):
    _index_dtype("index_select", index)
    if index.dim() > 1:
        fail("index_select", "index must be 0-d or 1-d")
    return canonical_dim("index_select", dim, a.dim())


def _index_select_meta(a, dim, index):
    dim = _index_select_check(a, dim, index)
    shape = list(a.shape)
    if a.dim():
        shape[dim] = index.numel()
    return torch.empty_strided(shape, contiguous_strides(shape), dtype=a.dtype, device=a.device)


def _index_select_impl(a, dim, index):
    _index_select_check(a, dim, index)
    return torch.index_select(a, dim, index).contiguous()


OPS["index_select"] = define_prim(
    "index_select(Tensor a, int dim, Tensor index) -> Tensor",
    PrimKind.INDEXING,
    meta=_index_select_meta,
    impl=_index_select_impl,
    doc="a with dim replaced by a[index] along dim (index: 1-d int64); contiguous output.",
)


def _index_check(name, a, indices):
    if len(indices) > a.dim():
        fail(name, f"{len(indices)} indices for a {a.dim()}-d tensor")
    shape = None
    for i in indices:
        if i is None:
            continue
        _index_dtype(name, i)
        if shape is None:
            shape = tuple(i.shape)
        elif tuple(i.shape) != shape:
            fail(name, "index tensors must share one shape (broadcast them first)")
    if shape is None:
        fail(name, "needs at least one index tensor")
    return shape


def _index_shape(a, indices):
    idx_shape = list(_index_check("index", a, indices))
    present = [k for k, i in enumerate(indices) if i is not None]
    adjacent = present == list(range(present[0], present[-1] + 1))
    rest = [a.shape[k] for k in range(a.dim()) if k >= len(indices) or indices[k] is None]
    if adjacent:
        before = [a.shape[k] for k in range(present[0])]
        after = rest[len(before) :]
        return before + idx_shape + after
    return idx_shape + rest


def _index_strides(a, indices, shape):
    """Eager's layout for advanced indexing: a TensorIterator over a restrided to the result
    shape (stride 0 in the index dims) and the index tensors (stride 0 elsewhere)."""
    present = [k for k, i in enumerate(indices) if i is not None]
    idx_ndim = indices[present[0]].dim()
    adjacent = present == list(range(present[0], present[-1] + 1))
    rest = [k for k in range(a.dim()) if k >= len(indices) or indices[k] is None]
    start = present[0] if adjacent else 0
    before = rest[:start]
    after = rest[start:]
    src = [a.stride(k) for k in before] + [0] * idx_ndim + [a.stride(k) for k in after]
    operands = [src]
    for k in present:
        i = indices[k]
        operands.append([0] * len(before) + list(i.stride()) + [0] * len(after))
    # a size-1 operand dim broadcast to a larger result dim has stride 0, as in eager
    for strides in operands[1:]:
        for d in range(len(before), len(before) + idx_ndim):
            if indices[present[0]].shape[d - len(before)] == 1 and shape[d] != 1:
                strides[d] = 0
    return elementwise_strides(shape, operands)


def _index_meta(a, indices):
    shape = _index_shape(a, indices)
    return torch.empty_strided(
        shape, _index_strides(a, indices, shape), dtype=a.dtype, device=a.device
    )


def _index_impl(a, indices):
    _index_check("index", a, indices)
    return torch.ops.aten.index.Tensor(a, list(indices))


OPS["index"] = define_prim(
    "index(Tensor a, Tensor?[] indices) -> Tensor",
    PrimKind.INDEXING,
    meta=_index_meta,
    impl=_index_impl,
    doc="Advanced indexing a[indices] (NumPy rules) with int64 index tensors of one shape.\n\n"
    "None keeps a dim whole. Adjacent index tensors put the index shape in their place, "
    "separated ones put it first. No bool masks (data-dependent shapes). Output dense in the "
    "memory order of a's kept dims and the index tensors (eager's layout).",
)


def _index_put_check(a, indices, values, accumulate):
    shape = _index_shape(a, indices)
    if values.dtype != a.dtype:
        fail("index_put", f"values dtype {values.dtype} must equal a's {a.dtype}")
    if tuple(values.shape) != tuple(shape):
        fail(
            "index_put",
            f"values must have the indexed shape {tuple(shape)} (broadcast "
            f"first), got {tuple(values.shape)}",
        )


def _index_put_meta(a, indices, values, accumulate):
    _index_put_check(a, indices, values, accumulate)
    return _index_put_out(a)


def _index_put_impl(a, indices, values, accumulate):
    _index_put_check(a, indices, values, accumulate)
    return torch.ops.aten.index_put.default(a, list(indices), values, accumulate)


OPS["index_put"] = define_prim(
    "index_put(Tensor a, Tensor?[] indices, Tensor values, bool accumulate) -> Tensor",
    PrimKind.INDEXING,
    meta=_index_put_meta,
    impl=_index_put_impl,
    doc="Copy of a with a[indices] = values (or += values when accumulate).\n\n"
    "indices as in `index`; values has exactly the indexed shape and a's dtype. Repeated "
    "indices: with accumulate all contributions add up, else which write lands is "
    "unspecified. Output has empty_like(a)'s strides.",
)
