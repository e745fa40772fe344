"""Creation prims (new tensors from scalars and shapes) and data-placement prims.

Creation prims take explicit ``dtype`` and ``device``; their meta functions return tensors on
the meta device (the real device is the ``device`` argument). Outputs are contiguous unless a
stride is given.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import (
    contiguous_strides,
    is_non_overlapping_and_dense,
    like_strides,
)

OPS: dict[str, torch._ops.OpOverload] = {}


def _meta_empty(shape, strides, dtype):
    return torch.empty_strided(shape, strides, dtype=dtype, device="meta")


def _check_shape(name, shape):
    if any(s < 0 for s in shape):
        fail(name, f"negative size in {list(shape)}")


def _full_meta(shape, fill_value, *, dtype, device):
    _check_shape("full", shape)
    return _meta_empty(shape, contiguous_strides(shape), dtype)


def _full_impl(shape, fill_value, *, dtype, device):
    _check_shape("full", shape)
    return torch.full(shape, fill_value, dtype=dtype, device=device)


OPS["full"] = define_prim(
    "full(SymInt[] shape, Scalar fill_value, *, ScalarType dtype, Device device) -> Tensor",
    PrimKind.CREATION,
    meta=_full_meta,
    impl=_full_impl,
    doc="Contiguous tensor of shape filled with fill_value converted to dtype.",
)


def _iota_meta(length, *, start, step, dtype, device):
    if length < 0:
        fail("iota", f"negative length {length}")
    return _meta_empty([length], (1,), dtype)


def _iota_impl(length, *, start, step, dtype, device):
    if length < 0:
        fail("iota", f"negative length {length}")
    idx = torch.arange(length, dtype=torch.int64, device=device)
    return (idx * step + start).to(dtype)


OPS["iota"] = define_prim(
    "iota(SymInt length, *, SymInt start, SymInt step, ScalarType dtype, Device device) -> Tensor",
    PrimKind.CREATION,
    meta=_iota_meta,
    impl=_iota_impl,
    doc="1-d tensor [start + i * step for i in range(length)], computed in int64, then "
    "converted to dtype.",
)


def _empty_strided_meta(shape, stride, *, dtype, device):
    _check_shape("empty_strided", shape)
    return _meta_empty(shape, stride, dtype)


def _empty_strided_impl(shape, stride, *, dtype, device):
    _check_shape("empty_strided", shape)
    return torch.empty_strided(shape, stride, dtype=dtype, device=device)


OPS["empty_strided"] = define_prim(
    "empty_strided(SymInt[] shape, SymInt[] stride, *, ScalarType dtype, Device device) -> Tensor",
    PrimKind.CREATION,
    meta=_empty_strided_meta,
    impl=_empty_strided_impl,
    doc="Uninitialised tensor with the given shape and strides; its values are unspecified "
    "and must be written before they are read.",
)


OPS["scalar_tensor"] = define_prim(
    "scalar_tensor(Scalar value, *, ScalarType dtype, Device device) -> Tensor",
    PrimKind.CREATION,
    meta=lambda value, *, dtype, device: _meta_empty([], (), dtype),
    impl=lambda value, *, dtype, device: torch.scalar_tensor(value, dtype=dtype, device=device),
    doc="0-d tensor holding value converted to dtype (as convert_element_type would).",
)


def _copy_strided_check(a, stride):
    if len(stride) != a.dim() or not is_non_overlapping_and_dense(a.shape, stride):
        fail("copy_strided", f"stride {list(stride)} is not dense for shape {tuple(a.shape)}")


def _copy_strided_meta(a, stride):
    _copy_strided_check(a, stride)
    return torch.empty_strided(a.shape, stride, dtype=a.dtype, device=a.device)


def _copy_strided_impl(a, stride):
    _copy_strided_check(a, stride)
    out = torch.empty_strided(a.shape, stride, dtype=a.dtype, device=a.device)
    out.copy_(a)
    return out


OPS["copy_strided"] = define_prim(
    "copy_strided(Tensor a, SymInt[] stride) -> Tensor",
    PrimKind.DATA_MOVEMENT,
    meta=_copy_strided_meta,
    impl=_copy_strided_impl,
    doc="A new tensor with a's values laid out with the given dense (non-overlapping) strides."
    "\n\nThis is clone/contiguous with an explicit memory layout.",
)


OPS["device_put"] = define_prim(
    "device_put(Tensor a, Device device) -> Tensor",
    PrimKind.DATA_MOVEMENT,
    meta=lambda a, device: torch.empty_strided(
        a.shape, like_strides(a.shape, a.stride()), dtype=a.dtype, device="meta"
    ),
    impl=lambda a, device: a.to(device, copy=True),
    doc="A copy of a on device (same dtype; strides as empty_like(a)).",
)
