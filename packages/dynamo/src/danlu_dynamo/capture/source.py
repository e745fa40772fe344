"""Where a value came from, as a Python expression over the frame state.

Names in the expressions: ``L`` (locals and live stack slots by name), ``G`` (the function's
globals), ``C`` (the function's closure cells), ``K`` (the frame's own cell objects by name).
Guards and the graph-input fetcher are compiled from these expressions.
"""

from __future__ import annotations

import keyword
import weakref

# expr -> Source, so guard compilation can find a source's parent and share its prefix.
_interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Source:
    __slots__ = ("expr", "parent", "suffix", "__weakref__")

    def __init__(self, expr: str, parent: Source | None = None, suffix: str = ""):
        self.expr = expr
        self.parent = parent
        self.suffix = suffix  # expr == parent.expr + suffix when parent is set
        _interned[expr] = self

    def attr(self, name: str) -> Source:
        if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__"):
            return Source(f"{self.expr}.{name}", self, f".{name}")
        return Source(f"getattr({self.expr}, {name!r})")

    def item(self, key) -> Source:
        return Source(f"{self.expr}[{key!r}]", self, f"[{key!r}]")

    def call(self, fn_expr: str) -> Source:
        return Source(f"{fn_expr}({self.expr})")

    def __repr__(self):
        return self.expr

    def __eq__(self, other):
        return isinstance(other, Source) and other.expr == self.expr

    def __hash__(self):
        return hash(self.expr)


def lookup(expr: str) -> Source | None:
    return _interned.get(expr)


def local_source(name: str) -> Source:
    return Source(f"L[{name!r}]")


def global_source(name: str) -> Source:
    return Source(f"G[{name!r}]")


def closure_source(index: int) -> Source:
    return Source(f"C[{index}].cell_contents")


def cell_source(name: str) -> Source:
    return Source(f"K[{name!r}].cell_contents")
