"""Reduction and scan prims over explicit dims.

Reductions drop the reduced dims (keepdim is a later ``expand_dims``) and keep the input dtype
(the decompositions convert first, so the accumulation dtype is visible in the graph: an int32
sum is ``convert_element_type(int64)`` then ``sum``; a bfloat16 sum is computed in float32).
Outputs are contiguous. Scans and sort keep the input's shape.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import canonical_dim, canonical_dims, dtype_in, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import contiguous_strides, like_strides

OPS: dict[str, torch._ops.OpOverload] = {}


def _reduced_shape(name, a, dims, allow_empty=True):
    dims = canonical_dims(name, dims, a.dim()) if a.dim() else []
    if not allow_empty:
        for d in dims:
            if a.shape[d] == 0:
                fail(name, f"cannot reduce over dim {d} of size 0 (no identity)")
        if a.dim() == 0 and a.numel() == 0:
            fail(name, "cannot reduce an empty tensor")
    return [s for i, s in enumerate(a.shape) if i not in dims]


def _empty(shape, dtype, device):
    return torch.empty_strided(shape, contiguous_strides(shape), dtype=dtype, device=device)


def _dims_arg(a, dims):
    # eager reads an empty dim list as "all dims"; for the prim it means "no dims"
    return list(dims) if dims else None


REDUCTIONS = {
    # name: (allowed dtypes, output dtype or None, has identity, eager impl, semantics)
    "sum": (
        "bool|int|float",
        None,
        True,
        lambda a, d: torch.sum(a, d, dtype=a.dtype) if d else a.clone(),
        "Sum over dims (0 for empty).",
    ),
    "prod": ("int|float", None, True, None, "Product over dims (1 for empty)."),
    "amax": (
        "bool|int|float",
        None,
        False,
        lambda a, d: torch.amax(a, d) if d else a.clone(),
        "Maximum over dims; NaN if any element is NaN.",
    ),
    "amin": (
        "bool|int|float",
        None,
        False,
        lambda a, d: torch.amin(a, d) if d else a.clone(),
        "Minimum over dims; NaN if any element is NaN.",
    ),
    "any": (
        "bool",
        torch.bool,
        True,
        lambda a, d: torch.any(a, d) if d else a.clone(),
        "True if any element over dims is True (False for empty); bool in, bool out.",
    ),
    "all": (
        "bool",
        torch.bool,
        True,
        lambda a, d: torch.all(a, d) if d else a.clone(),
        "True if every element over dims is True (True for empty); bool in, bool out.",
    ),
}


def _prod_impl(a, dims):
    out = a
    for d in sorted(dims, reverse=True):
        out = torch.prod(out, d, dtype=a.dtype)
    return out if dims else a.clone()


def _make_reduction(name, allowed, out_dtype, has_identity, impl, sem):
    def meta(a, dims):
        dtype_in(name, a, allowed)
        shape = _reduced_shape(name, a, dims, allow_empty=has_identity)
        return _empty(shape, out_dtype or a.dtype, a.device)

    def ref(a, dims):
        dtype_in(name, a, allowed)
        _reduced_shape(name, a, dims, allow_empty=has_identity)
        dims = [d % max(a.dim(), 1) for d in dims] if a.dim() else []
        out = impl(a, dims)
        return out.contiguous()

    meta.__name__ = f"{name}_meta"
    OPS[name] = define_prim(
        f"{name}(Tensor a, int[] dims) -> Tensor",
        PrimKind.REDUCTION,
        meta=meta,
        impl=ref,
        doc=f"{sem}\n\nReduces a ({allowed.replace('|', '/')}) over the listed dims, which are "
        "removed; an empty list reduces nothing (a copy). Output dtype "
        f"{out_dtype or 'is the input dtype'} (accumulation in at least that precision); "
        "contiguous output.",
    )


for _name, (_allowed, _odt, _ident, _impl, _sem) in REDUCTIONS.items():
    _make_reduction(_name, _allowed, _odt, _ident, _impl or _prod_impl, _sem)


def _var_meta(a, dims, correction):
    dtype_in("var", a, "float")
    return _empty(_reduced_shape("var", a, dims), a.dtype, a.device)


def _var_impl(a, dims, correction):
    dtype_in("var", a, "float")
    _reduced_shape("var", a, dims)
    if not dims:  # each element is its own group of N=1 (eager reads [] as "all dims")
        return ((a - a) ** 2 / (1 - correction)).contiguous()
    return torch.var(a, list(dims), correction=correction).contiguous()


OPS["var"] = define_prim(
    "var(Tensor a, int[] dims, float correction) -> Tensor",
    PrimKind.REDUCTION,
    meta=_var_meta,
    impl=_var_impl,
    doc="Variance over dims: sum((a - mean)^2) / (N - correction); NaN/inf when N <= correction."
    "\n\nFloat input; dims are removed; output dtype is the input dtype; contiguous output.",
)


def _arg_meta(name):
    def meta(a, dim):
        dtype_in(name, a, "int|float")
        shape = _reduced_shape(name, a, [dim], allow_empty=False) if a.dim() else []
        return _empty(shape, torch.int64, a.device)

    return meta


def _arg_impl(name, fn):
    def impl(a, dim):
        dtype_in(name, a, "int|float")
        if a.dim():
            _reduced_shape(name, a, [dim], allow_empty=False)
        if a.dim() == 0:
            return torch.zeros((), dtype=torch.int64, device=a.device)
        return fn(a, dim).contiguous()

    return impl


for _name, _fn, _word in (
    ("argmax", torch.argmax, "largest"),
    ("argmin", torch.argmin, "smallest"),
):
    OPS[_name] = define_prim(
        f"{_name}(Tensor a, int dim) -> Tensor",
        PrimKind.REDUCTION,
        meta=_arg_meta(_name),
        impl=_arg_impl(_name, _fn),
        doc=f"int64 index along dim of the {_word} element; first occurrence on ties; a NaN "
        "counts as the extreme value (first NaN wins).\n\nThe dim is removed; contiguous output.",
    )

# --- scans --------------------------------------------------------------------------------------


def _scan_meta(name):
    def meta(a, dim):
        dtype_in(name, a, "int|float")
        canonical_dim(name, dim, a.dim())
        return torch.empty_strided(
            a.shape, contiguous_strides(a.shape), dtype=a.dtype, device=a.device
        )

    return meta


def _scan_impl(fn):
    def impl(a, dim):
        return fn(a, dim, dtype=a.dtype).contiguous()

    return impl


for _name, _fn, _op in (("cumsum", torch.cumsum, "sum"), ("cumprod", torch.cumprod, "product")):
    OPS[_name] = define_prim(
        f"{_name}(Tensor a, int dim) -> Tensor",
        PrimKind.SCAN,
        meta=_scan_meta(_name),
        impl=_scan_impl(_fn),
        doc=f"Inclusive running {_op} along dim, in the input dtype (int/float).\n\n"
        "Same shape as a; contiguous output.",
    )


def _sort_meta(a, dim, descending, stable):
    dtype_in("sort", a, "bool|int|float")
    canonical_dim("sort", dim, a.dim())
    strides = like_strides(a.shape, a.stride())
    return (
        torch.empty_strided(a.shape, strides, dtype=a.dtype, device=a.device),
        torch.empty_strided(a.shape, strides, dtype=torch.int64, device=a.device),
    )


def _sort_impl(a, dim, descending, stable):
    dtype_in("sort", a, "bool|int|float")
    return tuple(torch.sort(a, dim=dim, descending=descending, stable=stable))


OPS["sort"] = define_prim(
    "sort(Tensor a, int dim, bool descending, bool stable) -> (Tensor values, Tensor indices)",
    PrimKind.SCAN,
    meta=_sort_meta,
    impl=_sort_impl,
    doc="Sorts along dim; returns (values, int64 indices into dim).\n\n"
    "NaN sorts above +inf. stable=True keeps equal elements in input order; with stable=False "
    "the order of equal elements is unspecified. Outputs have empty_like(a)'s strides.",
)
