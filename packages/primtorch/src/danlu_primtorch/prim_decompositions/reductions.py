"""Reductions, scans and sorts -> reduction/scan prims with explicit accumulation dtypes.

ATen's dims argument (None, [] = all dims; negative dims) is made explicit; keepdim becomes
``expand_dims``; bool/integer sums accumulate in int64; float16/bfloat16 accumulate in float32
and are rounded once at the end, as eager does.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import (
    P,
    canonical_dim,
    convert,
    full_like_shape,
    keep_dims,
    reduction_dims,
)
from danlu_primtorch.prim_decompositions.registry import register
from danlu_primtorch.prims.strides import contiguous_strides
from danlu_primtorch.type_promotion import computation_dtype, reduction_dtype

aten = torch.ops.aten


def _accumulating(prim, a, dim, keepdim, dtype):
    result = dtype if dtype is not None else reduction_dtype(a.dtype, integers_to_long=True)
    dims = reduction_dims(dim, a.dim())
    acc = computation_dtype(result)
    out = prim(convert(a, acc), dims)
    return keep_dims(convert(out, result), dims, keepdim)


@register(aten.sum.dim_IntList)
def sum_(a, dim, keepdim=False, *, dtype=None):
    return _accumulating(P.sum, a, dim, keepdim, dtype)


@register(aten.prod.dim_int)
def prod(a, dim, keepdim=False, *, dtype=None):
    if a.dtype == torch.bool and dtype is None:
        # bool product = all, stored as int64
        return keep_dims(
            P.convert_element_type(P.all(a, reduction_dims(dim, a.dim())), torch.int64),
            reduction_dims(dim, a.dim()),
            keepdim,
        )
    return _accumulating(P.prod, a, dim, keepdim, dtype)


def _extremum(prim):
    def decomp(a, dim=(), keepdim=False):
        dims = reduction_dims(dim, a.dim())
        for d in dims:
            if a.shape[d] == 0:
                raise IndexError(f"cannot reduce over dim {d} of size 0: no identity")
        return keep_dims(prim(a, dims), dims, keepdim)

    return decomp


register(aten.amax.default)(_extremum(P.amax))
register(aten.amin.default)(_extremum(P.amin))


@register(aten.var.correction)
def var(a, dim=None, *, correction=None, keepdim=False):
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"var needs a floating point input, got {a.dtype}")
    dims = reduction_dims(dim, a.dim())
    c = 1.0 if correction is None else float(correction)
    out = P.var(convert(a, computation_dtype(a.dtype)), dims, c)
    return keep_dims(convert(out, a.dtype), dims, keepdim)


def _arg(prim):
    def decomp(a, dim=None, keepdim=False):
        if dim is None:
            if a.numel() == 0:
                raise IndexError("argmax/argmin of an empty tensor")
            flat = P.reshape(a, [a.numel()])
            out = prim(flat, 0)
            if keepdim:
                out = P.reshape(out, [1] * a.dim())
            return out
        d = canonical_dim(dim, a.dim())
        if a.dim() == 0:
            return P.convert_element_type(
                P.scalar_tensor(0, dtype=torch.int64, device=a.device), torch.int64
            )
        out = prim(a, d)
        return P.expand_dims(out, [d]) if keepdim else out

    return decomp


register(aten.argmax.default)(_arg(P.argmax))
register(aten.argmin.default)(_arg(P.argmin))


def _any_all(prim):
    def decomp(a, dim=None, keepdim=False):
        # unlike sum/amax, any.dims/all.dims read an empty list as "no dims": elementwise truth
        dims = [] if dim is not None and len(dim) == 0 else reduction_dims(dim, a.dim())
        truth = a if a.dtype == torch.bool else P.ne(a, full_like_shape(a, 0))
        out = prim(truth, dims)
        if a.dtype == torch.uint8:  # eager keeps uint8 for uint8 inputs
            out = P.convert_element_type(out, torch.uint8)
        return keep_dims(out, dims, keepdim)

    return decomp


register(aten.any.dims)(_any_all(P.any))
register(aten.all.dims)(_any_all(P.all))

# --- scans ---------------------------------------------------------------------------------------


def _scan(prim):
    def decomp(a, dim, *, dtype=None):
        result = dtype if dtype is not None else reduction_dtype(a.dtype, integers_to_long=True)
        d = canonical_dim(dim, a.dim())
        if a.dim() == 0:
            return P.convert_element_type(a, result)
        acc = computation_dtype(result)
        return convert(prim(convert(a, acc), d), result)

    return decomp


register(aten.cumsum.default)(_scan(P.cumsum))
register(aten.cumprod.default)(_scan(P.cumprod))


def _sort(a, dim, descending, stable):
    d = canonical_dim(dim, a.dim())
    if a.dim() == 0:
        zero = P.scalar_tensor(0, dtype=torch.int64, device=a.device)
        return P.convert_element_type(a, a.dtype), zero
    values, indices = P.sort(a, d, bool(descending), bool(stable))
    return values, indices


@register(aten.sort.default)
def sort(a, dim=-1, descending=False):
    return _sort(a, dim, descending, False)


@register(aten.sort.stable)
def sort_stable(a, *, stable=None, dim=-1, descending=False):
    return _sort(a, dim, descending, bool(stable))


@register(aten.topk.default)
def topk(a, k, dim=-1, largest=True, sorted=True):
    """Stable sort + slice: among equal values the lower index comes first (eager's order for
    ties is unspecified; values always agree)."""
    d = canonical_dim(dim, a.dim())
    size = a.shape[d] if a.dim() else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: k={k} out of range for a dim of size {size}")
    values, indices = _sort(a, d, largest, True)
    if a.dim() == 0:
        return values, indices
    shape = list(a.shape)
    shape[d] = k
    strides = list(contiguous_strides(shape))  # eager's topk outputs are fresh, contiguous
    return (
        P.copy_strided(P.slice(values, d, 0, k, 1), strides),
        P.copy_strided(P.slice(indices, d, 0, k, 1), strides),
    )
