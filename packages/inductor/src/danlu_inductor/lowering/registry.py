"""The lowering table and the helpers every lowering uses.

A lowering takes the FX node's arguments with tensors replaced by IR nodes (``StorageBox``,
``View``) and returns IR nodes (or tuples/lists of them). Raising ``NotLowered`` makes the
graph use an ATen fallback kernel for that node instead.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
import torch

from danlu_inductor.ir.nodes import Pointwise, ReinterpretView, StorageBox, View
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import NotLowered, as_exprs, to_int

aten = torch.ops.aten
LOWERINGS: dict[torch._ops.OpOverload, Callable] = {}

SUPPORTED_DTYPES = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


def register(*targets):
    def wrap(fn):
        for t in targets:
            LOWERINGS[t] = fn
        return fn

    return wrap


def is_node(x) -> bool:
    return isinstance(x, (StorageBox, View, ReinterpretView))


def check_dtype(dtype):
    if dtype not in SUPPORTED_DTYPES:
        raise NotLowered(f"dtype {dtype} is not supported by the code generators")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Reduced-precision floats are computed in float32, like eager's opmath."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def meta_of(x):
    """A meta tensor standing in for ``x`` (for dtype rules and output metadata)."""
    if is_node(x):
        size = [to_int(s) for s in x.get_size()]
        return torch.empty(size, dtype=x.get_dtype(), device="meta")
    return x


def _category(dtype) -> int:
    if dtype == torch.bool:
        return 0
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 1


def result_type(*args) -> torch.dtype:
    """torch's type promotion: dimensioned tensors, then 0-d tensors, then Python scalars,
    each group only counting when it raises the category."""
    dims, zero_dims, scalars = None, None, None
    for a in args:
        if a is None:
            continue
        if is_node(a):
            group_is_dim = len(a.get_size()) > 0
            dt = a.get_dtype()
            if group_is_dim:
                dims = dt if dims is None else torch.promote_types(dims, dt)
            else:
                zero_dims = dt if zero_dims is None else torch.promote_types(zero_dims, dt)
        else:
            if isinstance(a, bool):
                dt = torch.bool
            elif isinstance(a, int | sympy.Expr):  # a symbolic size is an int scalar
                dt = torch.int64
            elif isinstance(a, float):
                dt = torch.get_default_dtype()
            elif isinstance(a, complex):
                dt = torch.complex64
            else:
                raise NotLowered(f"unsupported scalar {a!r}")
            scalars = dt if scalars is None else torch.promote_types(scalars, dt)
    out = dims
    for group in (zero_dims, scalars):
        if group is None:
            continue
        if out is None:
            out = group
        elif _category(group) > _category(out):
            out = (
                group
                if group is not scalars or _category(group) != 2
                else (torch.get_default_dtype())
            )
            if group is scalars and _category(group) == 1:
                out = torch.int64
    if out is None:
        raise NotLowered("no operand")
    return out


def broadcast_shapes(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = sympy.Integer(1)
        for s in shapes:
            j = i - (ndim - len(s))
            if j >= 0 and s[j] != 1:
                if size != 1 and size != s[j]:
                    raise NotLowered(f"shapes {shapes} do not broadcast")
                size = s[j]
        out.append(size)
    return out


def broadcast_loader(x, out_size):
    """Loader of ``x`` indexed by an index of the (broadcast) ``out_size``."""
    size = x.get_size()
    loader = x.make_loader()
    offset = len(out_size) - len(size)

    def load(index):
        idx = [sympy.Integer(0) if s == 1 else index[offset + k] for k, s in enumerate(size)]
        return loader(idx)

    return load


def value_loader(x, out_size, dtype):
    """Loader yielding ``x`` (tensor or Python scalar) converted to ``dtype``."""
    if is_node(x):
        load = broadcast_loader(x, out_size)
        if x.get_dtype() == dtype:
            return load
        return lambda index: ops.to_dtype(load(index), dtype)
    value = x
    if isinstance(value, sympy.Expr):
        if value.is_Integer:
            value = int(value)
        else:  # a symbolic size: read from the kernel's size arguments
            return lambda index: ops.to_dtype(ops.index_expr(value, torch.int64), dtype)

    return lambda index: ops.constant(value, dtype)


def make_pointwise(inputs, fn, out_dtype, compute=None):
    """A Pointwise over the broadcast shape of ``inputs``: ``fn(*values)`` in ``compute``."""
    check_dtype(out_dtype)
    compute = compute or compute_dtype(out_dtype)
    for x in inputs:
        if is_node(x):
            check_dtype(x.get_dtype())
    size = broadcast_shapes(*[x.get_size() for x in inputs if is_node(x)])
    loaders = [value_loader(x, size, compute) for x in inputs]

    def inner(index):
        v = fn(*[load(index) for load in loaders])
        return v if compute == out_dtype else ops.to_dtype(v, out_dtype)

    return StorageBox(Pointwise(out_dtype, size, inner))


def to_dtype(x, dtype):
    if x.get_dtype() == dtype:
        return x
    check_dtype(dtype)
    load = x.make_loader()
    return StorageBox(Pointwise(dtype, x.get_size(), lambda idx: ops.to_dtype(load(idx), dtype)))


def normalize_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise NotLowered(f"dim {dim} out of range for {ndim}-d tensor")
    return dim % n


def sizes_of(x):
    return as_exprs(x.get_size())
