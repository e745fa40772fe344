"""Sets of constants, iterated in eager's order.

A set iterates in its hash-table order, which depends on how it was built: the insertions and
their order, a table merged from another set (``set(s)``, ``s | t``, a literal's frozenset),
growth. The trace keeps ``real``, the real set of the constants, made by the same operations
eager runs, so its order is eager's; and a *recipe*, a function that makes that set again the
same way, so the set rebuilt after the graph has that order too (a copy would not: copying a
set into a fresh table can reorder it). Sets from the frame state enter a recipe as they are
at run time (their iteration order is guarded).
"""

from __future__ import annotations

import operator

from ..exc import Unsupported
from .base import ConstVar, Var
from .base import is_const_value as _is_const_value
from .containers import _const_index, note_mutation


def _added(s, c):
    s.add(c)
    return s


def _updated(s, other):
    s.update(other)
    return s


def _triples(changes):
    """(kind, value to add, recipe of the ``|=`` operand) per change."""
    for kind, a, _deps in changes:
        yield (kind, a, None) if kind == "add" else (kind, None, a)


def _const(x):
    return lambda env: x


class SetVar(Var):
    def __init__(self, items, source=None):
        self.real = set()
        self.vars = {}  # value -> the Var first added for it
        self.recipe = lambda env: set()  # env(source SetVar) -> its real set
        self.deps = set()  # the SetVars with a source the recipe reads
        self.source = source
        # a set from the frame state: its changes, in order, replayed on it after the graph
        # (("add", value) or ("ior", recipe of the other operand, its deps))
        self.changes: list = []
        for i in items:
            self.add(i)

    @classmethod
    def from_frame(cls, value, source):
        out = cls([])
        out.real = value  # never mutated in the trace (see _own)
        out.vars = {v: ConstVar(v) for v in value}
        out.source = source
        out.recipe = lambda env, _v=out: env(_v)
        out.deps = {out}
        return out

    @classmethod
    def made_by(cls, real, recipe, deps):
        out = cls([])
        out.real = real
        out.vars = {v: ConstVar(v) for v in real}
        out.recipe, out.deps = recipe, set(deps)
        return out

    def as_operand(self):
        """(the real set now, a recipe making it) for an operation that reads this set."""
        return self.real, self.recipe

    @property
    def items(self):
        return [self.vars[v] for v in self.real]

    def _own(self):
        """Before changing ``real``: a set from the frame state is copied first (its real
        object is changed at run time by the replay, never while tracing)."""
        if self.source is not None and self.real is not getattr(self, "_copy", None):
            self.real = self._copy = set(self.real)
            prev = self.recipe
            self.recipe = lambda env: set(prev(env))

    def getattr(self, tx, name):
        from .functions import BoundVarMethod

        return BoundVarMethod(self, name)

    def add(self, v):
        if not v.is_const():
            raise Unsupported("set of non-constants")
        c = v.const()
        try:
            present = c in self.real
        except TypeError as e:
            raise Unsupported(f"unhashable set item {type(c).__name__}") from e
        if not present:
            self._own()
            if self.source is not None:
                self.changes.append(("add", c, None))
            self.real.add(c)
            self.vars[c] = v
            prev = self.recipe
            self.recipe = lambda env: _added(prev(env), c)

    def update_from(self, tx, v: Var):
        """``set.update(v)`` as CPython runs it: a set or frozenset is merged table to table,
        anything else is added item by item."""
        if isinstance(v, SetVar) or (v.is_const() and isinstance(v.const(), set | frozenset)):
            other, other_recipe = v.as_operand() if isinstance(v, SetVar) else (v.const(), None)
            other_recipe = other_recipe or _const(other)
            self._own()
            self.real.update(other)
            for x in other:
                self.vars.setdefault(x, v.vars[x] if isinstance(v, SetVar) else ConstVar(x))
            prev = self.recipe
            self.recipe = lambda env: _updated(prev(env), other_recipe(env))
            if isinstance(v, SetVar):
                self.deps |= v.deps
            return
        for i in v.unpack(tx):
            self.add(i)

    def inplace(self, tx, op, other_real, other_recipe, other_deps):
        """``s |= t`` & co.: ``op`` is the in-place operator, run on ``real`` itself."""
        if self.source is not None:
            if op is not operator.ior:
                raise Unsupported("in-place set operation removing items from a set of the inputs")
            note_mutation(tx, self, "set")
            tx.output.side_effects.mutate(self)
        self._own()
        if self.source is not None:
            self.changes.append(("ior", other_recipe, set(other_deps)))
        op(self.real, other_real)
        for x in self.real:
            self.vars.setdefault(x, ConstVar(x))
        self.vars = {x: self.vars[x] for x in self.real}
        prev = self.recipe
        self.recipe = lambda env: op(prev(env), other_recipe(env))
        self.deps |= other_deps
        return self

    def python_type(self):
        return set

    def unpack(self, tx):
        return self.items

    def truth(self, tx):
        return bool(self.real)

    def call_method(self, tx, name, args, kwargs):
        if name == "__contains__":
            return ConstVar(_const_index(args[0]) in self.real)
        if name == "add" and len(args) == 1 and not kwargs:
            if self.source is not None:  # a set of constants from the frame state
                note_mutation(tx, self, "set")
                tx.output.side_effects.mutate(self)
            self.add(args[0])
            return ConstVar(None)
        if name == "update" and not kwargs and self.source is None:
            for a in args:
                self.update_from(tx, a)
            return ConstVar(None)
        if name in ("union", "intersection", "difference", "symmetric_difference") or name in (
            "issubset",
            "issuperset",
            "isdisjoint",
        ):
            from .dict_views import _real, _recipe

            reals = [_real(tx, a) for a in args]  # sets, views, dicts, sequences, constants
            recipes = [_recipe(a, r)[0] for a, r in zip(args, reals)]
            try:
                r = getattr(self.real, name)(*reals)
            except TypeError as e:
                raise Unsupported(f"TypeError from set.{name}") from e
            if isinstance(r, bool):
                return ConstVar(r)
            mine = self.recipe

            def recipe(env):
                return getattr(mine(env), name)(*[f(env) for f in recipes])

            deps = set(self.deps).union(*[a.deps for a in args if isinstance(a, SetVar)])
            if not all(_is_const_value(x) for x in r):
                raise Unsupported(f"set.{name} with items that are not constants")
            return SetVar.made_by(r, recipe, deps)
        if name == "__len__":
            return ConstVar(len(self.real))
        if name == "copy" and not args:
            mine = self.recipe
            return SetVar.made_by(self.real.copy(), lambda env: mine(env).copy(), self.deps)
        raise Unsupported(f"set.{name}")

    def replay_mutation(self, cg):
        """(inputs, apply) for the replays: this set's changes made again on the real set in
        their order (adds one by one, ``|=`` merging), so its order stays eager's."""
        obj = cg.from_source(self.source)
        deps = {}
        for _, _, ds in self.changes:
            for d in ds or ():
                deps[id(d)] = cg.rebuild(d)
        changes = list(self.changes)

        def inputs(ctx):
            def env(v):
                return deps[id(v)](ctx)

            operands = [c if kind == "add" else f(env) for kind, c, f in _triples(changes)]
            return obj(ctx), operands

        def apply(p):
            real, operands = p
            for (kind, _, _), x in zip(changes, operands):
                if kind == "add":
                    real.add(x)
                else:
                    real |= x

        return inputs, apply

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        deps = {id(d): cg.rebuild(d) for d in self.deps}
        recipe = self.recipe
        return lambda ctx: recipe(lambda v: deps[id(v)](ctx))
