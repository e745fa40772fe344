"""torch's control-flow operators (``torch.cond``, ``while_loop``, ``scan``, ``map``, ...).

In eager, these functions run their body through ``torch.compile`` (torch's own frame hook).
Under capture's frame hook that meant tracing torch's compiler (its imports, its callbacks)
as user code: a call did not finish in minutes. They are not captured into a graph: a
``torch.cond`` whose predicate is a Python value (a bool, a size comparison) is followed as the
branch it takes (what eager does with such a predicate); any other call is a graph break, and
the call then runs through a wrapper that turns capture's frame hook off for its duration, so
torch runs it exactly as in eager.
"""

from __future__ import annotations

import functools

import torch

from ..exc import Unsupported
from .base import Var


def _entry_points() -> dict:
    import torch._higher_order_ops as hops

    found = {id(torch.cond): (torch.cond, "torch.cond")}
    for name in ("while_loop", "scan", "associative_scan", "map"):
        fn = getattr(hops, name, None)
        if callable(fn) and not isinstance(fn, type(hops)):
            found[id(fn)] = (fn, f"torch._higher_order_ops.{name}")
    return found


_ENTRIES = None


def wrap_control_flow(value, source):
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = _entry_points()
    hit = _ENTRIES.get(id(value))  # by identity: never hash or compare user objects
    if hit is None or hit[0] is not value:
        return None
    return ControlFlowFnVar(value, hit[1], source)


def _outside_capture(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with capture's frame hook off on this thread."""
    from ... import eval_frame as ef

    prev = ef.set_eval_frame(None)
    try:
        return fn(*args, **kwargs)
    finally:
        ef.set_eval_frame(prev)


class ControlFlowFnVar(Var):
    def __init__(self, fn, name, source=None):
        self.fn = fn
        self.name = name
        self.source = source

    def python_type(self):
        return type(self.fn)

    def call(self, tx, args, kwargs):
        if self.fn is torch.cond:
            taken = _constant_branch(tx, args, kwargs)
            if taken is not None:
                return taken
            raise Unsupported(
                "torch.cond with a tensor predicate is not captured (it runs eagerly)"
            )
        raise Unsupported(f"{self.name} is not captured (it runs eagerly)")

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            from .base import ConstVar

            return ConstVar(getattr(self.fn, name))
        raise Unsupported(f"attribute {name} of {self.name}")

    def reconstruct(self, cg):
        # live at the graph break (it is the callable the break calls): the eager call
        # runs with capture's hook off
        wrapped = functools.partial(_outside_capture, self.fn)
        return lambda ctx: wrapped

    def __repr__(self):
        return f"ControlFlow({self.name})"


def _constant_branch(tx, args, kwargs):
    """``torch.cond(pred, true_fn, false_fn, operands)`` with a Python predicate: the branch."""
    names = ("pred", "true_fn", "false_fn", "operands")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    if set(bound) - set(names) or "pred" not in bound:
        return None
    pred = bound["pred"]
    from .symbolic import SymNumVar
    from .tensor import TensorVar

    if isinstance(pred, TensorVar) or not (pred.is_const() or isinstance(pred, SymNumVar)):
        return None
    if pred.is_const() and not isinstance(pred.const(), (bool, int, float)):
        return None
    if not {"true_fn", "false_fn"} <= set(bound):
        return None
    ops = bound.get("operands")
    operands = ops.unpack(tx) if ops is not None else []
    branch = bound["true_fn"] if pred.truth(tx) else bound["false_fn"]
    return branch.call(tx, operands, {})
