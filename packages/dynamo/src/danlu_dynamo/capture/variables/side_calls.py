"""Calls with Python side effects that capture keeps out of the graph without breaking it.

* ``functools.lru_cache`` functions with an unbounded cache (transformers' ``warning_once`` and
  ``info_once``) on constant arguments run once at trace time. The cache means eager code
  runs the body once per argument tuple anyway, so running it while tracing (the first call)
  and folding its result (a constant) keeps what the user sees; only ``cache_clear()`` between
  calls would make eager code run the body again.
* ``typing``'s cached subscripts (``Optional[X]``, ``Tuple[int, ...]``) are pure: folded too,
  whatever their cache size.
* ``logging.Logger.debug/info/warning/error/critical/log`` (and the ``logging.*`` functions on
  the root logger) with constant arguments are recorded and replayed after the graph on every
  run, attributed to the traced call's file, line and function; the logger's level is checked
  at run time, as the real call does.
"""

from __future__ import annotations

import functools
import logging
import warnings

import torch

from ..exc import Unsupported
from .base import ConstVar, Var, is_const_value
from .functions import BoundMethodVar

_LRU = functools._lru_cache_wrapper

_LOGGER_METHODS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "log": None,  # the level is the first argument
}


def _logging_fns(owner, prefix):
    # id -> (function, method name), matched by identity; a method some library replaced on
    # the class (not logging's own) is inlined as before
    out = {}
    for n in _LOGGER_METHODS:
        f = getattr(owner, n, None)
        if getattr(f, "__module__", None) == "logging" and f.__qualname__ == prefix + n:
            out[id(f)] = (f, n)
    return out


_METHOD_IDS = _logging_fns(logging.Logger, "Logger.")
_ROOT_FN_IDS = _logging_fns(logging, "")


def bind_special(tx, obj_var, attr, source):
    """``obj.name`` where the class attribute is an lru_cache function or a Logger method;
    None for anything else."""
    if isinstance(attr, _LRU):
        return BoundMethodVar(tx.output.wrap(attr, source), obj_var)
    hit = _METHOD_IDS.get(id(attr))
    if hit is not None and hit[0] is attr:
        return BoundMethodVar(LoggingCallVar(hit[1]), obj_var)
    return None


def wrap_special(out, value, source):
    """A real value met in the trace that this module handles; None for anything else."""
    if isinstance(value, _LRU):
        if source is not None:
            out.guards.id_match(source.expr, value)
        return LruCacheVar(value, source)
    hit = _ROOT_FN_IDS.get(id(value))
    if hit is not None and hit[0] is value:
        if source is not None:
            out.guards.id_match(source.expr, value)
        return RootLoggingCallVar(hit[1], value, source)
    from .hop_calls import wrap_control_flow

    flow = wrap_control_flow(value, source)
    if flow is not None:
        if source is not None:
            out.guards.id_match(source.expr, value)
        return flow
    if isinstance(value, torch.autocast):
        from .contexts import autocast_from_object

        return autocast_from_object(out, value, source)
    if value is warnings.warn:
        from .warn_calls import WarnCallVar

        if source is not None:
            out.guards.id_match(source.expr, value)
        return WarnCallVar(value, source)
    return None


def _real_arg(tx, var):
    """The real value of an argument the trace knows exactly (a constant, or an object from
    the frame's inputs without pending writes, guarded on its identity)."""
    from .objects import ObjectVar

    if var.is_const() and is_const_value(var.const()):
        return var.const()
    if (
        type(var) is ObjectVar
        and var.value is not None
        and not var.pending
        and not var.deleted
        and var.source is not None
    ):
        tx.output.guards.id_match(var.source.expr, var.value)
        return var.value
    raise Unsupported(f"argument {var} is not known exactly")


class LruCacheVar(Var):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return type(self.fn)

    def call(self, tx, args, kwargs):
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        # typing's subscripts (Optional[X], Tuple[...]) are pure: the cache only saves work
        pure = getattr(self.fn, "__module__", None) == "typing"
        if self.fn.cache_parameters().get("maxsize") is not None and not pure:
            raise Unsupported(f"lru_cache function {name} with a bounded cache")
        vals = [_real_arg(tx, a) for a in args]
        kvals = {k: _real_arg(tx, v) for k, v in kwargs.items()}
        try:
            hash((tuple(vals), tuple(kvals.items())))
        except TypeError as e:
            raise Unsupported(f"lru_cache function {name} on unhashable arguments") from e
        try:
            result = self.fn(*vals, **kvals)
        except Exception as e:
            raise Unsupported(f"{type(e).__name__} from lru_cache function {name}") from e
        if pure:
            return ConstVar(result)  # a typing object: immutable, the same one every call
        if not is_const_value(result):
            # Already cached: the eager run after the break gets the same object, no new effect.
            raise Unsupported(f"lru_cache function {name} returned a {type(result).__name__}")
        return ConstVar(result)

    def getattr(self, tx, name):
        if name == "__wrapped__":
            return tx.output.wrap(self.fn.__wrapped__, None)
        raise Unsupported(f"attribute {name!r} of lru_cache function")

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.fn)

    def __repr__(self):
        return f"LruCache({getattr(self.fn, '__qualname__', '?')})"


def _emit(logger, level, msg, args, where, root):
    # What Logger._log does, with the caller found at trace time.
    if root and not logger.handlers:
        logging.basicConfig()  # as logging.<level>() does on first use
    if logger.isEnabledFor(level):
        fn, lno, func = where
        logger.handle(logger.makeRecord(logger.name, level, fn, lno, msg, args, None, func))


def _record(tx, logger, method, args, kwargs, root=False):
    if kwargs:
        raise Unsupported(f"Logger.{method} with keyword arguments {sorted(kwargs)}")
    vals = [_real_arg(tx, a) for a in args]
    if method == "log":
        if not vals or not isinstance(vals[0], int):
            raise Unsupported("Logger.log without a constant integer level")
        level, vals = vals[0], vals[1:]
    else:
        level = _LOGGER_METHODS[method]
    if not vals:
        raise Unsupported(f"Logger.{method} without a message")
    inst = tx.current
    line = inst.positions.lineno if inst is not None and inst.positions else None
    where = (tx.code.co_filename, line or tx.code.co_firstlineno, tx.code.co_name)
    msg, rest = vals[0], tuple(vals[1:])
    tx.output.side_effects.replay_call(lambda: _emit(logger, level, msg, rest, where, root))
    return ConstVar(None)


class LoggingCallVar(Var):
    """``Logger.<method>`` called with the logger as its first argument."""

    def __init__(self, method):
        self.method = method

    def call(self, tx, args, kwargs):
        if not args:
            raise Unsupported(f"Logger.{self.method} without a logger")
        logger = _real_arg(tx, args[0])
        if not isinstance(logger, logging.Logger):
            raise Unsupported(f"Logger.{self.method} on a {type(logger).__name__}")
        return _record(tx, logger, self.method, args[1:], kwargs)

    def __repr__(self):
        return f"LoggerMethod({self.method})"


class RootLoggingCallVar(Var):
    """``logging.warning(...)`` & co.: the root logger, configured on first use."""

    def __init__(self, method, fn, source=None):
        self.method = method
        self.fn = fn
        self.source = source

    def call(self, tx, args, kwargs):
        return _record(tx, logging.getLogger(), self.method, args, kwargs, root=True)

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.fn)
