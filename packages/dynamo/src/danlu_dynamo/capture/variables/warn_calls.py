"""``warnings.warn(message, category, stacklevel)`` inside traced code, with constant arguments:
replayed after the graph on every run through ``warnings.warn_explicit``, with the location and
module globals (``__warningregistry__``) of the frame ``stacklevel`` names, as ``warn`` would
find them. The run applies the filters itself (once/default/module/always/ignore); a filter
that turns the warning into an exception would raise after the graph instead of at the call,
so the action the filters give is guarded and an ``error`` action breaks the graph instead.
"""

from __future__ import annotations

import warnings

from ..exc import Unsupported
from .base import ConstVar, Var


def filter_action(text, category, module, lineno):
    """The action ``warnings.filters`` give a warning (the first matching filter)."""
    for action, msg, cat, mod, ln in warnings.filters:
        if (
            (msg is None or msg.match(text))
            and issubclass(category, cat)
            and (mod is None or mod.match(module))
            and (ln == 0 or lineno == ln)
        ):
            return action
    return warnings.defaultaction


def _replay(message, category, where, f_globals):
    filename, lineno, module = where
    registry = f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        message, category, filename, lineno, module, registry, module_globals=f_globals
    )


_PARAMS = ("message", "category", "stacklevel", "source")


class WarnCallVar(Var):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def call(self, tx, args, kwargs):
        if len(args) > len(_PARAMS) or any(k not in _PARAMS for k in kwargs):
            raise Unsupported(f"warnings.warn with keywords {sorted(kwargs)}")
        bound = dict(zip(_PARAMS, args))
        for k, v in kwargs.items():
            if k in bound:
                raise Unsupported(f"warnings.warn: {k} given twice")
            bound[k] = v
        vals = {}
        for k, v in bound.items():
            if not v.is_const():
                raise Unsupported(f"warnings.warn with a non-constant {k}")
            vals[k] = v.const()
        message = vals.get("message")
        category = vals.get("category") or UserWarning
        stacklevel = vals.get("stacklevel", 1)
        if not isinstance(message, str):
            raise Unsupported("warnings.warn with a message that is not a str")
        if not (isinstance(category, type) and issubclass(category, Warning)):
            raise Unsupported("warnings.warn with a category that is not a Warning class")
        if vals.get("source") is not None or not isinstance(stacklevel, int):
            raise Unsupported("warnings.warn with a source object or odd stacklevel")
        frame = tx
        for _ in range(max(stacklevel, 1) - 1):
            frame = frame.parent
            if frame is None:
                # the frame that called the captured one: not known at trace time
                raise Unsupported("warnings.warn stacklevel reaching outside the captured frame")
        inst = frame.current
        line = inst.positions.lineno if inst is not None and inst.positions else None
        lineno = line or frame.code.co_firstlineno
        g = frame.f_globals
        module = g.get("__name__", "<string>") if isinstance(g, dict) else "<string>"
        action = filter_action(message, category, module, lineno)
        if action == "error":
            raise Unsupported(f"warnings.warn that the filters turn into an error ({message!r})")
        gs = tx.output.guards
        fn = gs._const(filter_action)
        args_s = ", ".join(gs._const(a) for a in (message, category, module, lineno))
        gs.add("WARNINGS", "", f"{fn}({args_s}) == {action!r}")
        where = (frame.code.co_filename, lineno, module)
        tx.output.side_effects.replay_call(lambda: _replay(message, category, where, g))
        return ConstVar(None)

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.fn)

    def __repr__(self):
        return "warnings.warn"
