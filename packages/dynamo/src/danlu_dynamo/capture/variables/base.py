"""The symbolic value protocol, constants and the NULL stack marker."""

from __future__ import annotations

import math
import operator
import types

import torch

from ..exc import Unsupported

# Values that are immutable and safe to fold: the trace specialises on them (guarded by value).
CONST_TYPES = (
    int,
    float,
    bool,
    str,
    bytes,
    complex,
    type(None),
    type(Ellipsis),
    type(NotImplemented),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.Size,
    range,
    slice,
    frozenset,
    types.CodeType,
)


def is_const_value(v) -> bool:
    if isinstance(v, (tuple, frozenset)) and type(v) in (tuple, frozenset):
        return all(is_const_value(x) for x in v)
    if isinstance(v, slice):
        return is_const_value(v.start) and is_const_value(v.stop) and is_const_value(v.step)
    return type(v) in CONST_TYPES


class Var:
    """A symbolic Python value."""

    source = None

    def python_type(self):
        raise Unsupported(f"python_type of {self}")

    def is_const(self) -> bool:
        return False

    def const(self):
        raise Unsupported(f"{self} is not a constant")

    def getattr(self, tx, name: str) -> Var:
        raise Unsupported(f"attribute {name!r} of {self}")

    def setattr(self, tx, name: str, value: Var):
        raise Unsupported(f"setting attribute {name!r} on {self}")

    def call(self, tx, args: list, kwargs: dict) -> Var:
        raise Unsupported(f"calling {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> Var:
        return self.getattr(tx, name).call(tx, args, kwargs)

    def truth(self, tx) -> bool:
        raise Unsupported(f"truth value of {self}")

    def unpack(self, tx) -> list:
        raise Unsupported(f"iterating over {self}")

    def get_iter(self, tx) -> Var:
        from .containers import ListIteratorVar

        return ListIteratorVar(self.unpack(tx))

    def reconstruct(self, cg):
        """A function ``ctx -> value`` that rebuilds this value at run time (see output_graph)."""
        if self.source is not None:
            return cg.from_source(self.source)
        raise Unsupported(f"cannot rebuild {self} after the graph")

    def reconstruct_held(self, cg, obj):
        """``reconstruct`` for a Var holding the Python object ``obj`` itself (a function, a
        callable): read again from its source when it has one, else that same object."""
        if self.source is not None:
            return cg.from_source(self.source)
        return lambda ctx: obj

    def __repr__(self):
        return f"{type(self).__name__}()"


class NullVar(Var):
    """CPython's NULL stack entry (before a callable, for CALL)."""

    def __repr__(self):
        return "NULL"

    def reconstruct(self, cg):
        from ..runtime_values import NULL

        return lambda ctx: NULL


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _has_sym(v) -> bool:
    t = type(v)
    if t in _SYM_TYPES:
        return True
    if t in (tuple, list, torch.Size):
        return any(_has_sym(x) for x in v)
    if t is slice:
        return _has_sym(v.start) or _has_sym(v.stop) or _has_sym(v.step)
    return False


class ConstVar(Var):
    def __init__(self, value, source=None):
        if _has_sym(value):
            # A symbolic size reaching a constant (dynamic shapes): specialise it, guarded
            # by the ShapeEnv, so no SymInt is ever baked into a graph or rebuilt.
            from .symbolic import concrete

            value = concrete(value)
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def is_const(self):
        return True

    def const(self):
        return self.value

    def truth(self, tx):
        return bool(self.value)

    def unpack(self, tx):
        try:
            items = list(self.value)
        except TypeError as e:
            raise Unsupported(f"iterating over {type(self.value).__name__}") from e
        return [ConstVar(x) for x in items]

    def getattr(self, tx, name):
        try:
            v = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(f"AttributeError {name!r} on constant") from e
        if callable(v) and not is_const_value(v):
            from .functions import ConstMethodVar

            return ConstMethodVar(self.value, name)
        return tx.output.wrap_const(v)

    def reconstruct(self, cg):
        v = self.value
        return lambda ctx: v

    def __repr__(self):
        return f"Const({self.value!r})"


# Pure functions safe to fold on constant arguments.
FOLDABLE = {
    abs,
    len,
    min,
    max,
    round,
    divmod,
    pow,
    int,
    float,
    bool,
    str,
    repr,
    hash,
    ord,
    chr,
    tuple,
    list,
    sorted,
    sum,
    any,
    all,
    isinstance,
    issubclass,
    callable,
    range,
    slice,
    format,
    frozenset,
    reversed,
    type,
}
FOLDABLE |= {v for k, v in vars(operator).items() if callable(v) and not k.startswith("_")}
FOLDABLE -= {operator.setitem, operator.delitem, operator.iadd, operator.iconcat}
FOLDABLE |= {v for k, v in vars(math).items() if callable(v) and not k.startswith("_")}
