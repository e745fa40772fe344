"""Small shared pieces for the family files: dims, dtypes, reduction shapes."""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import _disable_current_modes

aten = torch.ops.aten


@functools.cache
def promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """``torch.promote_types`` without recording an op in any active dispatch mode."""
    with _disable_current_modes():
        return torch.promote_types(a, b)


def wrap_dim(dim: int, ndim: int) -> int:
    """A possibly negative dim as a non-negative one (a 0-d tensor accepts dims 0 and -1)."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dim {dim} out of range for a tensor of {ndim} dims")
    return dim % n


def wrap_dims(dims, ndim: int) -> list[int]:
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({wrap_dim(d, ndim) for d in dims})


def reduction_dims(dims, ndim: int) -> list[int]:
    """``dim=None`` or ``dim=[]`` means every dim, as ATen's reductions read it."""
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return list(range(ndim))
    return wrap_dims(dims, ndim)


def numel_of(x: torch.Tensor, dims) -> int:
    n = 1
    if x.dim() == 0:
        return 1
    for d in dims:
        n *= x.shape[d]
    return n


def opmath(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype for low-precision floats (what ATen computes halves/bfloats in)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def to_dtype(x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    if dtype is None or x.dtype == dtype:
        return x
    return aten._to_copy.default(x, dtype=dtype)


def default_float(dtype: torch.dtype) -> torch.dtype:
    """Integer/bool inputs of float-valued math produce the default float dtype."""
    if dtype.is_floating_point or dtype.is_complex:
        return dtype
    return torch.get_default_dtype()


def sum_to_size(x: torch.Tensor, shape) -> torch.Tensor:
    """Reduce a broadcast result back to ``shape`` (the inverse of broadcasting, for backwards)."""
    shape = list(shape)
    lead = x.dim() - len(shape)
    dims = list(range(lead))
    dims += [lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1]
    if dims:
        x = aten.sum.dim_IntList(x, dims, keepdim=True)
    if lead:
        x = aten.view.default(x, shape)
    return x


def zeros(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    return aten.full.default(
        list(shape), 0, dtype=dtype or like.dtype, device=like.device, pin_memory=False
    )


def iota(n: int, like: torch.Tensor, dtype=torch.int64, start=0, step=1) -> torch.Tensor:
    return aten.arange.start_step(
        start, start + n * step, step, dtype=dtype, device=like.device, pin_memory=False
    )


def scalar_dtype(v, like: torch.Tensor) -> torch.dtype:
    """The dtype ATen's promotion gives ``like op v`` for a Python number ``v``."""
    t = like.dtype
    if isinstance(v, (bool, torch.SymBool)):
        return t
    if isinstance(v, (int, torch.SymInt)):  # a symbolic size promotes as an int
        return torch.int64 if t == torch.bool else t
    if isinstance(v, (float, torch.SymFloat)):
        return t if (t.is_floating_point or t.is_complex) else torch.get_default_dtype()
    if isinstance(v, complex):
        return t if t.is_complex else torch.complex64
    raise TypeError(f"not a number: {v!r}")


def scalar_like(v, like: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor standing for the Python number ``v`` next to ``like`` (keeps promotion)."""
    if isinstance(v, torch.Tensor):
        return v
    return aten.scalar_tensor.default(v, dtype=scalar_dtype(v, like), device=like.device)


def where(cond: torch.Tensor, a, b) -> torch.Tensor:
    """``where.self`` that also takes Python numbers for either branch."""
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        dt = torch.get_default_dtype() if isinstance(a, float) or isinstance(b, float) else None
        a = aten.scalar_tensor.default(a, dtype=dt, device=cond.device)
    if not isinstance(a, torch.Tensor):
        a = scalar_like(a, b)
    if not isinstance(b, torch.Tensor):
        b = scalar_like(b, a)
    return aten.where.self(cond, a, b)


def _category(dt: torch.dtype) -> int:
    if dt.is_complex:
        return 3
    if dt.is_floating_point:
        return 2
    return 0 if dt == torch.bool else 1


def _combine(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    # ATen's rule: a lower-priority operand (0-d tensor, Python number) only matters when it is of
    # a higher category than the higher-priority one.
    if higher is None:
        return lower
    if lower is None or _category(higher) >= _category(lower):
        return higher
    if _category(lower) == 3 and _category(higher) == 2:
        return promote(higher, lower)
    return lower if higher != torch.bool or _category(lower) > 1 else promote(higher, lower)


def result_dtype(*args) -> torch.dtype:
    """ATen's ``result_type`` for tensors and Python numbers, computed without dispatching."""
    dim = zero = wrapped = None
    for a in args:
        if a is None:
            continue
        if isinstance(a, torch.Tensor):
            if a.dim() > 0:
                dim = a.dtype if dim is None else promote(dim, a.dtype)
            else:
                zero = a.dtype if zero is None else promote(zero, a.dtype)
        else:
            if isinstance(a, bool):
                d = torch.bool
            elif isinstance(a, int):
                d = torch.int64
            elif isinstance(a, float):
                d = torch.get_default_dtype()
            else:
                d = (
                    torch.complex64
                    if torch.get_default_dtype() == torch.float32
                    else torch.complex128
                )
            wrapped = d if wrapped is None else promote(wrapped, d)
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise ValueError("result_dtype needs at least one operand")
    return out
