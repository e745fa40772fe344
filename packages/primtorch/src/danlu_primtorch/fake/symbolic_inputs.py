"""Fake tensors with symbolic sizes made from real tensors.

A dimension marked dynamic gets a size symbol from the ShapeEnv (0 and 1 stay ints). Strides
follow the sizes where the real tensor is dense along them (a contiguous ``[s0, s1, 64]``
tensor has strides ``[64*s1, 64, 1]``); a stride that does not follow from the sizes below it
becomes a symbol of its own. Every size or stride that is not a fresh symbol is recorded as an
input check (``x.size(1) == 64``, ``x.stride(0) == 64*s1``), so guards describe the whole
input layout the graph was traced for (strides of dims of size 0/1 are not checked: they do
not affect the layout). A symbolic fake is a fresh tensor: it does not alias other inputs.
"""

from __future__ import annotations

import torch

from .devices import normalize_device


def normalize_dims(dynamic_dims, ndim: int) -> tuple[int, ...]:
    if dynamic_dims is True or dynamic_dims == "all":
        return tuple(range(ndim))
    dims = set()
    for d in dynamic_dims:
        if not -ndim <= d < max(ndim, 1):
            raise IndexError(f"dynamic dim {d} out of range for a {ndim}-d tensor")
        dims.add(d % ndim if ndim else 0)
    return tuple(sorted(dims))


def symbolic_fake(mode, t: torch.Tensor, dims, source: str):
    """The fake of ``t`` with the sizes of ``dims`` symbolic (see the module docstring)."""
    env = mode.shape_env
    sizes = []
    for d, n in enumerate(t.shape):
        if d in dims:
            sizes.append(env.create_symbolic_size(n, f"{source}.size({d})"))
        else:
            env.add_input_check(f"{source}.size({d})", n)
            sizes.append(n)
    strides = [None] * t.dim()
    order = sorted(range(t.dim()), key=lambda d: (t.stride(d), t.shape[d]))
    real_next, sym_next = 1, 1
    for d in order:
        real, n = t.stride(d), t.shape[d]
        if n < 2:
            strides[d] = real
            continue
        if real == real_next:
            strides[d] = sym_next
        elif isinstance(sym_next, int) or real < 2:
            strides[d] = real
        else:
            sym = env.create_symbol(real, f"{source}.stride({d})")
            strides[d] = env.symint(sym)
        if not (isinstance(strides[d], torch.SymInt) and _is_fresh(strides[d], env, source, d)):
            env.add_input_check(f"{source}.stride({d})", _expr(strides[d]))
        real_next, sym_next = real * n, strides[d] * sizes[d]
    with torch._C._DisableTorchDispatch():
        meta = torch.empty_strided(sizes, strides, dtype=t.dtype, device="meta")
    from .tensor import FakeTensor

    return FakeTensor(mode, meta, normalize_device(t.device))


def _expr(x):
    from ..symbolic import sym_expr

    return sym_expr(x)


def _is_fresh(s, env, source, d) -> bool:
    e = _expr(s)
    return e.is_Symbol and env.source_of(e) == f"{source}.stride({d})"


def has_symbolic_sizes(fakes, flat) -> bool:
    """Whether any tensor or argument of an op is symbolic."""
    for x in flat:
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
    for t in fakes:
        if t._has_symbolic_sizes_strides:
            return True
    return False
