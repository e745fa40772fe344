"""View prims: outputs alias the input's storage; meta functions give exact view strides.

``reshape`` is the one exception: it aliases when the input's strides allow the new shape
(exactly when eager ``torch.reshape`` does) and is a fresh contiguous tensor otherwise.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import canonical_dim, canonical_dims, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import contiguous_strides, view_strides

OPS: dict[str, torch._ops.OpOverload] = {}


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# --- broadcast_in_dim ---------------------------------------------------------------------------


def _broadcast_geometry(a, shape, broadcast_dimensions):
    shape = list(shape)
    bdims = list(broadcast_dimensions)
    if len(bdims) != a.dim():
        fail(
            "broadcast_in_dim",
            f"needs one broadcast dimension per input dim, got {bdims} for a {a.dim()}-d input",
        )
    if any(b >= c for b, c in zip(bdims, bdims[1:])) or any(not 0 <= b < len(shape) for b in bdims):
        fail(
            "broadcast_in_dim",
            f"broadcast_dimensions {bdims} must increase within [0, {len(shape)})",
        )
    for i, b in enumerate(bdims):
        if a.shape[i] != 1 and a.shape[i] != shape[b]:
            fail(
                "broadcast_in_dim",
                f"input dim {i} of size {a.shape[i]} cannot broadcast to size {shape[b]}",
            )
    # unsqueeze the missing dims (eager's stride rule), then expand size-1 dims with stride 0
    sizes, strides = list(a.shape), list(a.stride())
    for d in range(len(shape)):
        if d not in bdims:
            new_stride = 1 if d >= len(sizes) else sizes[d] * strides[d]
            sizes.insert(d, 1)
            strides.insert(d, new_stride)
    for d in range(len(shape)):
        if sizes[d] != shape[d]:
            strides[d] = 0
    return shape, strides


def _broadcast_in_dim_meta(a, shape, broadcast_dimensions):
    shape, strides = _broadcast_geometry(a, shape, broadcast_dimensions)
    return a.as_strided(shape, strides, a.storage_offset())


def _broadcast_in_dim_impl(a, shape, broadcast_dimensions):
    _broadcast_geometry(a, shape, broadcast_dimensions)
    for d in range(len(shape)):
        if d not in broadcast_dimensions:
            a = a.unsqueeze(d)
    return a.expand(shape)


OPS["broadcast_in_dim"] = define_prim(
    "broadcast_in_dim(Tensor(a) a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_broadcast_in_dim_meta,
    impl=_broadcast_in_dim_impl,
    doc="View of a broadcast to shape; input dim i becomes output dim broadcast_dimensions[i].\n\n"
    "broadcast_dimensions increases strictly; each input dim has size 1 or the target size. "
    "Broadcast dims get stride 0, new dims of size 1 get eager unsqueeze's stride.",
)

# --- reshape / view_of --------------------------------------------------------------------------


def _reshape_check(a, shape):
    if _numel(shape) != a.numel() or any(s < 0 for s in shape):
        fail("reshape", f"cannot reshape {tuple(a.shape)} to {tuple(shape)} (no -1 allowed)")


def _reshape_meta(a, shape):
    _reshape_check(a, shape)
    strides = view_strides(a.shape, a.stride(), shape)
    if strides is None:
        return torch.empty_strided(shape, contiguous_strides(shape), dtype=a.dtype, device=a.device)
    return a.as_strided(shape, strides, a.storage_offset())


def _reshape_impl(a, shape):
    _reshape_check(a, shape)
    return torch.reshape(a, shape)


OPS["reshape"] = define_prim(
    "reshape(Tensor(a) a, SymInt[] shape) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_reshape_meta,
    impl=_reshape_impl,
    doc="a's elements in row-major order with a new shape (same numel, no -1).\n\n"
    "A view when a's strides allow it (as eager reshape), else a new contiguous tensor.",
)


OPS["view_of"] = define_prim(
    "view_of(Tensor(a) a) -> Tensor(a)",
    PrimKind.VIEW,
    meta=lambda a: a.as_strided(a.shape, a.stride(), a.storage_offset()),
    impl=lambda a: torch.ops.aten.alias.default(a),
    doc="A new view of all of a (same shape, strides, offset).",
)

# --- permute ------------------------------------------------------------------------------------


def _permute_check(a, dims):
    if (
        sorted(canonical_dims("permute", dims, a.dim())) != list(range(a.dim()))
        or len(dims) != a.dim()
    ):
        fail("permute", f"{list(dims)} is not a permutation of {a.dim()} dims")


def _permute_meta(a, dims):
    _permute_check(a, dims)
    dims = [d % max(a.dim(), 1) for d in dims]
    return a.as_strided([a.shape[d] for d in dims], [a.stride(d) for d in dims], a.storage_offset())


def _permute_impl(a, dims):
    _permute_check(a, dims)
    return a.permute(dims)


OPS["permute"] = define_prim(
    "permute(Tensor(a) a, int[] dims) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_permute_meta,
    impl=_permute_impl,
    doc="View with output dim i = input dim dims[i] (transpose is a permute).",
)

# --- slice --------------------------------------------------------------------------------------


def _slice_check(a, dim, start, end, step):
    dim = canonical_dim("slice", dim, a.dim())
    if a.dim() == 0:
        fail("slice", "cannot slice a 0-d tensor")
    if step < 1 or not 0 <= start <= end <= a.shape[dim]:
        fail(
            "slice",
            f"wants 0 <= start <= end <= size and step >= 1, got start={start} "
            f"end={end} step={step} size={a.shape[dim]}",
        )
    return dim


def _slice_meta(a, dim, start, end, step):
    dim = _slice_check(a, dim, start, end, step)
    shape, strides = list(a.shape), list(a.stride())
    shape[dim] = (end - start + step - 1) // step
    strides[dim] = strides[dim] * step
    return a.as_strided(shape, strides, a.storage_offset() + start * a.stride(dim))


def _slice_impl(a, dim, start, end, step):
    dim = _slice_check(a, dim, start, end, step)
    return torch.ops.aten.slice.Tensor(a, dim, start, end, step)


OPS["slice"] = define_prim(
    "slice(Tensor(a) a, int dim, SymInt start, SymInt end, SymInt step) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_slice_meta,
    impl=_slice_impl,
    doc="View of a[start:end:step] along dim; needs 0 <= start <= end <= size, step >= 1.",
)

# --- squeeze / expand_dims ----------------------------------------------------------------------


def _squeeze_check(a, dims):
    dims = canonical_dims("squeeze", dims, a.dim()) if a.dim() else []
    for d in dims:
        if a.shape[d] != 1:
            fail("squeeze", f"dim {d} has size {a.shape[d]}, not 1")
    return dims


def _squeeze_meta(a, dims):
    dims = _squeeze_check(a, dims)
    keep = [d for d in range(a.dim()) if d not in dims]
    return a.as_strided([a.shape[d] for d in keep], [a.stride(d) for d in keep], a.storage_offset())


def _squeeze_impl(a, dims):
    dims = _squeeze_check(a, dims)
    return torch.squeeze(a, tuple(dims)) if dims else torch.ops.aten.alias.default(a)


OPS["squeeze"] = define_prim(
    "squeeze(Tensor(a) a, int[] dims) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_squeeze_meta,
    impl=_squeeze_impl,
    doc="View of a without the listed dims, each of which must have size 1.",
)


def _expand_dims_geometry(a, dims):
    ndim = a.dim() + len(dims)
    dims = sorted(canonical_dims("expand_dims", dims, ndim))
    sizes, strides = list(a.shape), list(a.stride())
    for d in dims:
        new_stride = 1 if d >= len(sizes) else sizes[d] * strides[d]
        sizes.insert(d, 1)
        strides.insert(d, new_stride)
    return sizes, strides, dims


def _expand_dims_meta(a, dims):
    sizes, strides, _ = _expand_dims_geometry(a, dims)
    return a.as_strided(sizes, strides, a.storage_offset())


def _expand_dims_impl(a, dims):
    _, _, dims = _expand_dims_geometry(a, dims)
    if not dims:
        return torch.ops.aten.alias.default(a)
    for d in dims:
        a = a.unsqueeze(d)
    return a


OPS["expand_dims"] = define_prim(
    "expand_dims(Tensor(a) a, int[] dims) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_expand_dims_meta,
    impl=_expand_dims_impl,
    doc="View of a with new size-1 dims at the listed output positions (unsqueeze).\n\n"
    "A new dim gets stride size*stride of the dim it precedes (1 at the end), as eager.",
)

# --- as_strided ---------------------------------------------------------------------------------


def _as_strided_check(a, size, stride, storage_offset):
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
        fail("as_strided", f"bad geometry size={list(size)} stride={list(stride)}")
    if storage_offset < 0:
        fail("as_strided", f"negative storage_offset {storage_offset}")


def _as_strided_meta(a, size, stride, storage_offset):
    _as_strided_check(a, size, stride, storage_offset)
    return a.as_strided(size, stride, storage_offset)


def _as_strided_impl(a, size, stride, storage_offset):
    _as_strided_check(a, size, stride, storage_offset)
    return a.as_strided(size, stride, storage_offset)


OPS["as_strided"] = define_prim(
    "as_strided(Tensor(a) a, SymInt[] size, SymInt[] stride, SymInt storage_offset) -> Tensor(a)",
    PrimKind.VIEW,
    meta=_as_strided_meta,
    impl=_as_strided_impl,
    doc="View of a's storage with the given size, strides and storage offset (in elements).\n\n"
    "The offset is absolute (not relative to a's offset), as eager as_strided.",
)
