"""Argument checks shared by the meta functions: prims are explicit, so mismatches are errors."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class PrimArgumentError(ValueError):
    """A prim was called with arguments outside its documented contract."""


def fail(prim: str, msg: str) -> None:
    raise PrimArgumentError(f"danlu_prims.{prim}: {msg}")


def same_shape_dtype_device(prim: str, *tensors: torch.Tensor, check_dtype: bool = True) -> None:
    first = tensors[0]
    for t in tensors[1:]:
        if tuple(t.shape) != tuple(first.shape):
            fail(
                prim,
                f"operands must have one shape (no broadcasting), got {tuple(first.shape)} "
                f"and {tuple(t.shape)}; use broadcast_in_dim first",
            )
        if check_dtype and t.dtype != first.dtype:
            fail(
                prim,
                f"operands must have one dtype (no type promotion), got {first.dtype} and "
                f"{t.dtype}; use convert_element_type first",
            )
        if t.device != first.device:
            fail(prim, f"operands must be on one device, got {first.device} and {t.device}")


def canonical_dim(prim: str, dim: int, ndim: int) -> int:
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        fail(prim, f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % bound


def canonical_dims(prim: str, dims: Sequence[int], ndim: int) -> list[int]:
    out = [canonical_dim(prim, d, ndim) for d in dims]
    if len(set(out)) != len(out):
        fail(prim, f"repeated dims {list(dims)}")
    return out


def dtype_in(prim: str, t: torch.Tensor, allowed: str) -> None:
    """``allowed``: any of 'bool', 'int', 'float', 'complex' joined with '|'."""
    kinds = set(allowed.split("|"))
    d = t.dtype
    kind = (
        "bool"
        if d == torch.bool
        else "complex"
        if d.is_complex
        else "float"
        if d.is_floating_point
        else "int"
    )
    if kind not in kinds:
        fail(prim, f"dtype {d} not supported (wants {allowed})")
