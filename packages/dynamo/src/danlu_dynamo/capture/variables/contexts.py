"""Context managers met in traced code: grad mode (also as decorators) and autocast."""

from __future__ import annotations

import inspect

import torch

from ..exc import Unsupported
from .base import ConstVar, Var
from .objects import ClassVar, ObjectVar


class GradModeVar(Var):
    """``torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)`` as a context manager."""

    def __init__(self, mode: bool, call_sets_now: bool = False):
        self.mode = mode
        self.prev = None

    def enter(self, tx):
        if self.prev is not None:  # set_grad_enabled(b) already switched when called
            return ConstVar(None)
        self.prev = torch.is_grad_enabled()
        tx.output.set_grad_mode(self.mode)
        return ConstVar(None)

    def exit(self, tx):
        tx.output.set_grad_mode(self.prev)
        return ConstVar(False)

    def getattr(self, tx, name):
        if name == "__enter__":
            return _CtxMethod(self, "enter")
        if name == "__exit__":
            return _CtxMethod(self, "exit")
        raise Unsupported(f"grad mode attribute {name}")

    def reconstruct(self, cg):
        raise Unsupported("grad-mode context alive at a graph break")


# Grad-mode managers used as decorators re-create themselves per call through ``clone``
# (``self.__class__(*fields)``); ``set_grad_enabled.clone`` lives in torch.autograd, which
# capture does not inline, so it is handled here.
_GRAD_MODE_FIELDS = {
    torch.no_grad: (),
    torch.enable_grad: (),
    torch.set_grad_enabled: ("mode",),
}


def grad_mode_clone(tx, obj):
    if not isinstance(obj, ObjectVar) or obj.cls not in _GRAD_MODE_FIELDS:
        raise Unsupported(f"grad-mode clone() of {obj}")
    fields = [obj.getattr(tx, f) for f in _GRAD_MODE_FIELDS[obj.cls]]
    return tx.output.wrap(obj.cls, None).call(tx, fields, {})


class _CtxMethod(Var):
    def __init__(self, ctx, which):
        self.ctx = ctx
        self.which = which

    def call(self, tx, args, kwargs):
        return getattr(self.ctx, self.which)(tx)

    def reconstruct(self, cg):
        raise Unsupported("context manager alive at a graph break")


def with_block_open(stack) -> bool:
    """A traced ``with`` block is open: its context's bound method waits on the value stack,
    and a graph break there would have to rebuild the context."""
    return any(isinstance(v, _CtxMethod) for v in stack)


class AutocastVar(Var):
    """``torch.autocast(...)`` as a context manager: entered for real while tracing (so example
    values get autocast dtypes) and recorded as ``_enter_autocast``/``_exit_autocast`` nodes."""

    def __init__(self, device_type, dtype, enabled, cache_enabled):
        self.args = (device_type, dtype, enabled, cache_enabled)
        # one entry per enter not yet exited: a real autocast object (a decorator's) may be
        # entered again while entered (recursion)
        self.entered: list = []  # (real context, graph node)

    def enter(self, tx):
        from torch.amp import autocast_mode

        real = autocast_mode._enter_autocast(*self.args)
        tx.output.active_ctx.append(self)
        node = tx.output.graph.create_node(
            "call_function", autocast_mode._enter_autocast, self.args, {}
        )
        self.entered.append((real, node))
        return ConstVar(None)

    def exit(self, tx):
        from torch.amp import autocast_mode

        real, node = self.entered.pop()
        autocast_mode._exit_autocast(real)
        tx.output.active_ctx.remove(self)
        tx.output.graph.create_node("call_function", autocast_mode._exit_autocast, (node,), {})
        return ConstVar(False)

    def abandon(self):
        from torch.amp import autocast_mode

        real, _ = self.entered.pop()
        autocast_mode._exit_autocast(real)

    def getattr(self, tx, name):
        if name == "__enter__":
            return _CtxMethod(self, "enter")
        if name == "__exit__":
            return _CtxMethod(self, "exit")
        raise Unsupported(f"autocast attribute {name}")

    def reconstruct(self, cg):
        raise Unsupported("autocast context alive at a graph break")


class AutocastClassVar(ClassVar):
    def call(self, tx, args, kwargs):
        if not all(a.is_const() for a in args) or not all(v.is_const() for v in kwargs.values()):
            raise Unsupported("autocast with non-constant arguments")
        a = [x.const() for x in args]
        k = {n: v.const() for n, v in kwargs.items()}
        if self.cls is torch.autocast:
            bound = inspect.signature(torch.autocast.__init__).bind(None, *a, **k)
            bound.apply_defaults()
            p = bound.arguments
            return AutocastVar(p["device_type"], p["dtype"], p["enabled"], p["cache_enabled"])
        bound = inspect.signature(self.cls.__init__).bind(None, *a, **k)
        bound.apply_defaults()
        p = bound.arguments
        return AutocastVar("cpu", p.get("dtype"), p.get("enabled", True), p.get("cache_enabled"))


def autocast_from_object(out, value, source):
    """A real ``torch.autocast`` object (the one a ``@torch.autocast(...)`` decorator keeps)."""
    if type(value) not in (torch.autocast, torch.cpu.amp.autocast):
        return None
    fields = ("device", "fast_dtype", "_enabled", "_cache_enabled")
    if source is not None:
        out.guards.id_match(source.expr, value)
        for f in fields:
            out.guards.constant_match(f"{source.expr}.{f}", getattr(value, f))
    return AutocastVar(*(getattr(value, f) for f in fields))
