"""``contextlib.contextmanager`` context managers, followed as Python runs them.

``@contextmanager`` makes ``_GeneratorContextManager(func, args, kwds)``; capture models that
object (``GeneratorCtxVar``) instead of inlining its ``__init__``: ``__enter__`` runs the
generator function inlined up to its first ``yield`` and keeps that frame suspended (the
yielded value is what ``as`` binds); ``__exit__`` (normal exit, early ``return`` from the
body) resumes it from the ``yield`` to its end, so the code after the ``yield`` (restoring a
flag, a global, an attribute) runs after the body, as in eager. A generator that yields again
is eager's ``RuntimeError("generator didn't stop")``: a graph break. Exceptions raised in the
body are not traced (a graph break inside a ``with`` block runs the block eagerly), and the
manager cannot be rebuilt at a graph break, so it is never handed half-run to eager code.
"""

from __future__ import annotations

from ..exc import Unsupported
from .base import ConstVar, Var


class Suspended(Exception):  # noqa: N818 - control flow, not an error
    """Raised out of a generator frame's ``run()`` at a ``yield`` (``value``: what it yielded)."""

    def __init__(self, value):
        self.value = value


class GeneratorCtxVar(Var):
    def __init__(self, func: Var, args: list, kwargs: dict):
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.frame = None  # the suspended generator frame (a child translator)
        self.state = "new"

    @staticmethod
    def make(tx, args, kwargs):
        """``_GeneratorContextManager(func, args, kwds)`` in the trace."""
        from .containers import DictVar

        names = ("func", "args", "kwds")
        if len(args) + len(kwargs) != 3 or any(k not in names for k in kwargs):
            raise Unsupported("_GeneratorContextManager with unexpected arguments")
        bound = dict(zip(names, args))
        bound.update(kwargs)
        a, k = bound["args"], bound["kwds"]
        if not isinstance(k, DictVar):
            raise Unsupported("contextmanager keyword arguments that are not a dict")
        return GeneratorCtxVar(bound["func"], a.unpack(tx), dict(k.items))

    def python_type(self):
        import contextlib

        return contextlib._GeneratorContextManager

    def enter(self, tx):
        if self.state != "new":
            raise Unsupported("RuntimeError: generator didn't yield (context entered twice)")
        self.state = "entered"
        start = getattr(self.func, "generator_frame", None)
        if start is None:
            raise Unsupported(f"contextmanager over {self.func}")
        self.frame = start(tx, self.args, self.kwargs)
        try:
            self.frame.run()
        except Suspended as s:
            return s.value
        raise Unsupported("RuntimeError: generator didn't yield")

    def exit(self, tx):
        if self.state != "entered":
            raise Unsupported("__exit__ of a contextmanager that was not entered")
        self.state = "done"
        try:
            self.frame.run()
        except Suspended as e:
            raise Unsupported("RuntimeError: generator didn't stop") from e
        return ConstVar(False)

    def getattr(self, tx, name):
        from .contexts import _CtxMethod

        if name == "__enter__":
            return _CtxMethod(self, "enter")
        if name == "__exit__":
            return _CtxMethod(self, "exit")
        raise Unsupported(f"contextmanager attribute {name}")

    def reconstruct(self, cg):
        raise Unsupported("contextmanager alive at a graph break")

    def __repr__(self):
        return f"GeneratorCtx({self.func})"


def contextmanager_var(tx, func):
    """``contextlib.contextmanager(func)`` called in the traced code."""
    return ContextManagerFnVar(func)


class ContextManagerFnVar(Var):
    """What ``contextmanager(func)`` returns: each call makes a ``GeneratorCtxVar``."""

    def __init__(self, func):
        self.func = func

    def call(self, tx, args, kwargs):
        return GeneratorCtxVar(self.func, list(args), dict(kwargs))

    def reconstruct(self, cg):
        import contextlib

        f = cg.rebuild(self.func)
        return lambda ctx: contextlib.contextmanager(f(ctx))
