"""State kept on user classes: reads of class attributes are guarded, writes
(``Cls.count += 1``, ``type(self).n = v``) are kept in the trace and replayed after the graph.

A class met without a source (the type of an object made in the trace) is read through a
held reference (``held_source``), so its attributes are guarded like any other input: a
value changed on the class after compiling is seen. Writes live in
``side_effects.class_attrs`` keyed by (class, name), so every symbolic view of the class
(through an instance, ``type(obj)``, ``obj.__class__``, a global) reads the same pending
value; a subclass sees a write to its base unless it defines the name itself.
"""

from __future__ import annotations

import types

from ..exc import Unsupported
from ..source import Source

# Classes read through a held reference: index -> class (classes live as long as programs do).
_HELD: list = []
_HELD_INDEX: dict[int, int] = {}


def held_source(cls) -> Source:
    """A source for ``cls`` that guards and rebuilds can evaluate (needs only ``sys``)."""
    i = _HELD_INDEX.get(id(cls))
    if i is None or _HELD[i] is not cls:
        i = len(_HELD)
        _HELD.append(cls)
        _HELD_INDEX[id(cls)] = i
    return Source(f"sys.modules[{__name__!r}]._HELD[{i}]")


def class_source(cls) -> Source | None:
    """``held_source`` for a user class (its attributes are guarded when read); None for
    torch's and builtin classes (library classes are assumed not to change)."""
    mod = getattr(cls, "__module__", None) or ""
    if mod == "builtins" or mod == "torch" or mod.startswith(("torch.", "danlu")):
        return None
    return held_source(cls)


def pending_class_attr(tx, cls, name):
    """The value a write in the trace left for ``cls.name`` (MRO order), or None."""
    writes = tx.output.side_effects.class_attrs
    if not writes:
        return None
    for klass in getattr(cls, "__mro__", (cls,)):
        hit = writes.get((klass, name))
        if hit is not None:
            return hit
        if name in klass.__dict__:
            return None
    return None


def set_class_attr(tx, cls, name, value):
    """``cls.name = value`` in the traced code: recorded, replayed after the graph."""
    meta = type(cls)
    if meta.__setattr__ is not type.__setattr__:
        raise Unsupported(f"setting {cls.__name__}.{name} (metaclass with __setattr__)")
    if name.startswith("__") and name.endswith("__"):
        raise Unsupported(f"setting {cls.__name__}.{name}")
    if cls.__module__ == "builtins" or not isinstance(cls.__dict__, types.MappingProxyType):
        raise Unsupported(f"setting an attribute of {cls.__name__}")
    meta_attr = None
    for klass in meta.__mro__:
        if name in klass.__dict__:
            meta_attr = klass.__dict__[name]
            break
    if meta_attr is not None and hasattr(type(meta_attr), "__set__"):
        raise Unsupported(f"setting {cls.__name__}.{name} (a metaclass descriptor)")
    from .functions import NestedFunctionVar, UserFunctionVar

    if isinstance(value, (UserFunctionVar, NestedFunctionVar)):
        # read back through an instance it would have to become a bound method
        raise Unsupported(f"setting a function as {cls.__name__}.{name}")
    tx.output.side_effects.class_attrs[(cls, name)] = value


def class_attr_replays(cg, se):
    """``(get, apply)`` pairs writing the recorded class attributes after the graph."""
    out = []
    for (cls, name), var in se.class_attrs.items():
        val = cg.rebuild(var)
        out.append((val, lambda x, c=cls, n=name: setattr(c, n, x)))
    return out
