"""The frame hook's Python face: callbacks, compiled regions and the per-code cache.

While a thread runs inside a compiled region, each Python function frame it starts is shown to
the C hook (``_eval_frame``) before it runs. The hook looks in the code object's cache for an
entry whose ``check_fn`` accepts the frame's arguments; on a hit it runs that entry's
transformed code instead, on a miss it calls the region's callback, which may return a new
:class:`GuardedCode`. See the README section "Frame hook API" for the full contract.

This module never imports torch.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import types
from collections.abc import Callable

from . import _eval_frame as _C

__all__ = [
    "GuardedCode",
    "FrameInfo",
    "set_eval_frame",
    "get_eval_frame",
    "compiled_region",
    "mark_skip",
    "reset",
    "set_cache_limit",
    "get_cache_limit",
    "cache_entries",
    "code_state",
    "check_transformed_code",
    "failure_reason",
    "miss_reasons",
    "hook_installed",
    "stats",
    "reset_stats",
]

log = logging.getLogger("danlu_dynamo")

FrameInfo = _C.FrameInfo
get_eval_frame = _C.get_eval_frame
mark_skip = _C.mark_skip
get_cache_limit = _C.get_cache_limit
cache_entries = _C.cache_entries
code_state = _C.code_state
hook_installed = _C.hook_installed
stats = _C.stats
reset_stats = _C.reset_stats


class GuardedCode:
    """A transformed code object valid while ``check_fn(f_locals)`` is true.

    ``check_fn`` may carry a ``failure_reason(f_locals) -> str | None`` attribute (the guard
    builder's check functions do); it names the failing guard in the recompile-limit log.
    """

    __slots__ = ("code", "check_fn")

    def __init__(self, code: types.CodeType, check_fn: Callable[[dict], bool]):
        self.code = code
        self.check_fn = check_fn

    def __repr__(self) -> str:
        return f"GuardedCode({self.code.co_qualname} at {self.code.co_filename}:{self.code.co_firstlineno})"


def set_eval_frame(callback):
    """Set this thread's hook state and return the previous one.

    ``None``: off. ``False``: run-only (cached entries are used, nothing is compiled). A
    callable ``callback(frame: FrameInfo, cache_size: int) -> GuardedCode | None``: look up the
    cache and call it on a miss. The interpreter-wide evaluator is installed while any thread
    has a state other than None.
    """
    return _C.set_eval_frame(callback)


def set_cache_limit(n: int) -> int:
    """Set how many entries a code object may collect before misses run eagerly (default 8).
    Returns the previous limit."""
    return _C.set_cache_limit(n)


def compiled_region(fn: Callable, callback) -> Callable:
    """Wrap ``fn`` so that its call runs with the hook state ``callback`` (see
    :func:`set_eval_frame`): ``fn``'s own frame and every frame it starts are shown to the
    hook. The previous state comes back when the call returns or raises; regions nest."""

    @functools.wraps(fn)
    def region(*args, **kwargs):
        prev = _C.set_eval_frame(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            _C.set_eval_frame(prev)

    return region


# ---- called from C -----------------------------------------------------------------------

_LAYOUT_ATTRS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount")
_ARG_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
_NOT_PLAIN = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)


def _n_args(code: types.CodeType) -> int:
    flags = code.co_flags
    return (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(flags & inspect.CO_VARARGS)
        + bool(flags & inspect.CO_VARKEYWORDS)
    )


def check_transformed_code(original: types.CodeType, code: types.CodeType) -> None:
    """Raise ValueError unless ``code`` can stand in for ``original``: the C hook calls a
    function made of ``code`` and ``original``'s closure with ``original``'s bound arguments."""
    where = f"transformed code for {original.co_qualname}"
    for attr in _LAYOUT_ATTRS:
        if getattr(code, attr) != getattr(original, attr):
            raise ValueError(
                f"{where}: {attr} is {getattr(code, attr)}, the original has "
                f"{getattr(original, attr)}"
            )
    if (code.co_flags & _ARG_FLAGS) != (original.co_flags & _ARG_FLAGS):
        raise ValueError(f"{where}: *args/**kwargs flags differ from the original")
    n = _n_args(original)
    if code.co_varnames[:n] != original.co_varnames[:n]:
        raise ValueError(
            f"{where}: argument names {code.co_varnames[:n]} differ from the original's "
            f"{original.co_varnames[:n]}"
        )
    if code.co_freevars != original.co_freevars:
        raise ValueError(
            f"{where}: co_freevars {code.co_freevars} differ from the original's "
            f"{original.co_freevars} (the original closure is reused by slot)"
        )
    if code.co_cellvars != original.co_cellvars:
        raise ValueError(
            f"{where}: co_cellvars {code.co_cellvars} differ from the original's "
            f"{original.co_cellvars}"
        )
    if code.co_flags & _NOT_PLAIN:
        raise ValueError(f"{where}: must not be a generator or coroutine")
    if not code.co_flags & inspect.CO_OPTIMIZED or not code.co_flags & inspect.CO_NEWLOCALS:
        raise ValueError(f"{where}: must be function code (CO_OPTIMIZED | CO_NEWLOCALS)")


def _is_module_dict(f_globals: dict) -> bool:
    name = f_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is f_globals


def _validate(original: types.CodeType, result, f_globals: dict) -> tuple:
    if not isinstance(result, GuardedCode):
        raise TypeError(
            f"the frame hook callback must return a GuardedCode or None, got "
            f"{type(result).__name__} (for {original.co_qualname})"
        )
    if not isinstance(result.code, types.CodeType):
        raise TypeError(f"GuardedCode.code must be a code object, got {type(result.code)}")
    if not callable(result.check_fn):
        raise TypeError("GuardedCode.check_fn must be callable")
    if result.code is not original:
        check_transformed_code(original, result.code)
    return (result.check_fn, result.code, result, _is_module_dict(f_globals))


def failure_reason(check_fn, f_locals: dict) -> str | None:
    """The failing guard's description, if ``check_fn`` can tell."""
    explain = getattr(check_fn, "failure_reason", None)
    if explain is None:
        return None
    try:
        return explain(f_locals)
    except Exception as e:  # an explanation must never break the program
        return f"<failure_reason raised {type(e).__name__}: {e}>"


def miss_reasons(code: types.CodeType, f_locals: dict) -> list[str | None]:
    """Why each cache entry of ``code`` (most recent first) rejects ``f_locals``: the failing
    guard's description, or None where the entry accepts them or cannot tell."""
    return [failure_reason(g.check_fn, f_locals) for g in _C.cache_entries(code)]


def _on_cache_limit(code: types.CodeType, f_locals: dict, entries: list) -> None:
    reason = failure_reason(entries[0][0], f_locals) if entries else None
    log.warning(
        "recompile limit (%d) reached for %s (%s:%d): it now runs eagerly when no cached "
        "entry matches; last failing guard: %s",
        _C.get_cache_limit(),
        code.co_qualname,
        code.co_filename,
        code.co_firstlineno,
        reason or "unknown (the check function gives no failure_reason)",
    )


_OWN_CODE = tuple(
    fn.__code__
    for fn in (compiled_region(lambda: None, None), _validate, _on_cache_limit, failure_reason)
)


def _mark_own_code() -> None:
    # Our own frames are never shown to a callback.
    for code in _OWN_CODE:
        _C.mark_skip(code)


def reset() -> None:
    """Drop every cache entry, skip mark and recompile-limit stop."""
    _C.reset()
    _mark_own_code()


_C._install_helpers(_validate, _on_cache_limit)
_mark_own_code()
