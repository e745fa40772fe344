"""Running one ATen op on fake tensors with symbolic sizes.

ATen's meta kernels mostly take symbolic sizes (``SymInt`` arithmetic goes through the
SymNode protocol and records guards), but some C++ kernels insist on concrete sizes: they call
``sizes()`` / ``numel()``, which for a tensor with symbolic sizes and a Python dispatch key
comes back here as ``aten.size.default`` & co., or they reject symbolic lists outright. So an
op on symbolic fakes runs, in order:

0. a view op with a meta function of ours (``symbolic_views.py``: ``slice``) uses it;
1. its meta kernel, with concrete-size queries refused;
2. if that fails, its danlu decomposition (down to prims, whose meta functions are written for
   symbolic sizes), run inside the fake mode so that every op it emits comes back here;
3. if there is none, its meta kernel again, now answering concrete-size queries by
   specialising the sizes asked for (``int(s)``: a guard ``Eq(s, value)``). Correct, but the
   result only serves those sizes; the guard says so.

Only metadata is computed this way; a tracer above the fake mode still records the op itself.
"""

from __future__ import annotations

import threading

import torch
from torch.utils._pytree import tree_map

from .symbolic_views import SYMBOLIC_VIEW_META
from .tensor import kernel_invocation

aten = torch.ops.aten

_state = threading.local()


class ConcreteSizeNeeded(RuntimeError):
    """A kernel asked a symbolic fake tensor for concrete sizes while that was refused."""


SIZE_QUERIES = {
    aten.size.default: lambda t: tuple(int(s) for s in t.shape),
    aten.stride.default: lambda t: tuple(int(s) for s in t.stride()),
    aten.storage_offset.default: lambda t: int(t.storage_offset()),
    aten.numel.default: lambda t: int(t.numel()),
    aten.sym_size.default: lambda t: t.shape,
    aten.sym_stride.default: lambda t: t.stride(),
    aten.sym_storage_offset.default: lambda t: t.storage_offset(),
    aten.sym_numel.default: lambda t: t.numel(),
    aten.dim.default: lambda t: t.dim(),
}
_CONCRETE = {
    aten.size.default,
    aten.stride.default,
    aten.storage_offset.default,
    aten.numel.default,
}


def answer_size_query(mode, func, args):
    if func in _CONCRETE and getattr(_state, "refuse_concrete", 0):
        raise ConcreteSizeNeeded(f"{func} on a tensor with symbolic sizes")
    with torch._C._DisableTorchDispatch():
        return SIZE_QUERIES[func](args[0])


_TABLE: dict | None = None


def _decompositions() -> dict:
    global _TABLE
    if _TABLE is None:
        from ..decompositions import decomposition_table

        _TABLE = decomposition_table("prims")
    return _TABLE


# Failures of a meta kernel that mean "not with symbolic sizes" (also real argument errors:
# those are raised again by the last attempt).
_RETRYABLE = (RuntimeError, TypeError, ValueError, AssertionError, IndexError, RecursionError)


# Ops that choose among library kernels from sizes and return the choice (which fused
# attention kernel runs). Their C++ code reads concrete sizes; answering those would
# specialise every size. They are decided on the sizes' hints, without a guard: the choice
# rests on dtypes, head size, masks and dropout, which stay static, and the chosen kernel
# serves any sequence length.
_HINTED_CHOICES = {aten._fused_sdp_choice.default}


def _hint_int(s):
    return s.node.require_hint() if isinstance(s, torch.SymInt) else s


def _with_hints(mode, x):
    if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
        size = [_hint_int(s) for s in x.shape]
        stride = [_hint_int(s) for s in x.stride()]
        return mode.fake_empty(size, stride, x.dtype, getattr(x, "fake_device", x.device))
    return x


def run_symbolic(mode, func, args, kwargs):
    """Outputs (meta or fake tensors) of ``func`` on symbolic fakes; see the module docstring."""
    view_meta = SYMBOLIC_VIEW_META.get(func)
    if view_meta is not None:
        return view_meta(mode, func, args, kwargs)
    if func in _HINTED_CHOICES:
        hinted = tree_map(lambda x: _with_hints(mode, x), (args, kwargs))
        with kernel_invocation():
            return func(*hinted[0], **hinted[1])
    _state.refuse_concrete = getattr(_state, "refuse_concrete", 0) + 1
    try:
        with kernel_invocation():
            return func(*args, **kwargs)
    except _RETRYABLE as e:
        if _is_data_dependent(e):
            raise
    finally:
        _state.refuse_concrete -= 1
    if ORDER_META_FIRST:
        out = _meta_kernel_in_mode(mode, func, args, kwargs)
        if out is not None:
            return out
    decomposition = _decompositions().get(func)
    if decomposition is not None:
        with mode:
            out = decomposition(*args, **kwargs)
        if out is not NotImplemented:
            return out
    if not ORDER_META_FIRST:
        out = _meta_kernel_in_mode(mode, func, args, kwargs)
        if out is not None:
            return out
    saved = getattr(_state, "refuse_concrete", 0)
    _state.refuse_concrete = 0  # nested attempts must not refuse: we specialise here
    try:
        with kernel_invocation():
            return func(*args, **kwargs)
    finally:
        _state.refuse_concrete = saved


def _is_data_dependent(e) -> bool:
    from .errors import DataDependentOutputError

    return isinstance(e, DataDependentOutputError)


ORDER_META_FIRST = True
_META_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)


def _meta_kernel_in_mode(mode, func, args, kwargs):
    """The op's Meta kernel called directly, with the fake mode active: the ops a Python meta
    kernel (or a composite) runs come back through the mode one by one, so the ones whose C++
    kernel refuses symbolic sizes are decomposed there. None when it fails."""
    _state.refuse_concrete = getattr(_state, "refuse_concrete", 0) + 1
    try:
        with mode:
            return func.redispatch(_META_KEYS, *args, **kwargs)
    except _RETRYABLE as e:
        if _is_data_dependent(e):
            raise
        return None
    finally:
        _state.refuse_concrete -= 1
