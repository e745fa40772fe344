"""Data-movement prims that build one tensor out of others: concatenation and constant padding.

Outputs are contiguous, or channels-last when every input is a 4-d channels-last tensor
(eager's memory-format rule for cat and constant_pad_nd).
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import canonical_dim, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import (
    channels_last_strides,
    contiguous_strides,
    is_channels_last_contiguous,
    is_contiguous,
)

OPS: dict[str, torch._ops.OpOverload] = {}


def _suggests_channels_last(t) -> bool:
    return (
        t.dim() == 4
        and not is_contiguous(t.shape, t.stride())
        and is_channels_last_contiguous(t.shape, t.stride())
    )


def _layout(shape, like):
    if len(shape) == 4 and like and all(_suggests_channels_last(t) for t in like):
        return channels_last_strides(shape)
    return contiguous_strides(shape)


def _cat_check(tensors, dim):
    if not tensors:
        fail("cat", "needs at least one tensor")
    first = tensors[0]
    if first.dim() == 0:
        fail("cat", "cannot concatenate 0-d tensors")
    dim = canonical_dim("cat", dim, first.dim())
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.device != first.device or t.dim() != first.dim():
            fail("cat", "tensors must share dtype, device and rank (convert first)")
        for d in range(first.dim()):
            if d != dim and t.shape[d] != first.shape[d]:
                fail(
                    "cat",
                    f"sizes differ outside dim {dim}: {tuple(first.shape)} vs {tuple(t.shape)}",
                )
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return shape


def _cat_meta(tensors, dim):
    shape = _cat_check(tensors, dim)
    return torch.empty_strided(
        shape, _layout(shape, tensors), dtype=tensors[0].dtype, device=tensors[0].device
    )


def _cat_impl(tensors, dim):
    shape = _cat_check(tensors, dim)
    out = torch.empty_strided(
        shape, _layout(shape, tensors), dtype=tensors[0].dtype, device=tensors[0].device
    )
    torch.cat(tensors, dim, out=out)
    return out


OPS["cat"] = define_prim(
    "cat(Tensor[] tensors, int dim) -> Tensor",
    PrimKind.DATA_MOVEMENT,
    meta=_cat_meta,
    impl=_cat_impl,
    doc="Concatenation along dim of tensors sharing dtype, device, rank and other sizes.\n\n"
    "No legacy 1-d empty tensors (drop them first). Contiguous output (channels-last if all "
    "inputs are 4-d channels-last).",
)


def _pad_check(a, low, high):
    if len(low) != a.dim() or len(high) != a.dim():
        fail("pad", f"needs one low and one high padding per dim ({a.dim()})")
    shape = [s + lo + hi for s, lo, hi in zip(a.shape, low, high)]
    if any(s < 0 for s in shape):
        fail("pad", f"negative padding larger than the dim: shape {shape}")
    return shape


def _pad_meta(a, low, high, value):
    shape = _pad_check(a, low, high)
    return torch.empty_strided(shape, _layout(shape, [a]), dtype=a.dtype, device=a.device)


def _pad_impl(a, low, high, value):
    shape = _pad_check(a, low, high)
    out = torch.empty_strided(shape, _layout(shape, [a]), dtype=a.dtype, device=a.device)
    out.fill_(value)
    src, dst = a, out
    for d in range(a.dim()):
        lo, hi = low[d], high[d]
        src = src.narrow(d, max(-lo, 0), a.shape[d] - max(-lo, 0) - max(-hi, 0))
        dst = dst.narrow(d, max(lo, 0), src.shape[d])
    dst.copy_(src)
    return out


OPS["pad"] = define_prim(
    "pad(Tensor a, SymInt[] low, SymInt[] high, Scalar value) -> Tensor",
    PrimKind.DATA_MOVEMENT,
    meta=_pad_meta,
    impl=_pad_impl,
    doc="a with low[d] / high[d] elements of value added before / after each dim d.\n\n"
    "Negative padding crops. Contiguous output (channels-last for a 4-d channels-last a).",
)
