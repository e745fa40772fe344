"""Lazy iterator wrappers over iterators that other code also reads.

``zip``, ``map``, ``filter``, ``enumerate``, ``itertools.islice`` and ``itertools.chain`` are
lazy in eager: they pull from their input iterators one step at a time. The trace normally
computes their items when they are made (the inputs are sequences, or iterators nothing else
reads), which gives the same values. When an input iterator is *shared* (passed twice,
``zip(it, it)``; held in a local, a cell, a container or an attribute; read from the frame
state), taking its items up front would take items eager leaves for the other readers, so the
wrapper is a ``LazyIterVar`` that steps its inputs on demand, and it is rebuilt after the graph
as the real wrapper over the rebuilt inputs (which stay shared). Helpers that take their whole
input up front in the trace but not in eager refuse a shared iterator (``refuse_shared``).
"""

from __future__ import annotations

import itertools

from ..exc import Unsupported
from .base import ConstVar, Var
from .containers import DictVar, ListIteratorVar, SeqVar, TupleVar


def _mentions(v, target, depth=2) -> bool:
    if v is target:
        return True
    if depth == 0:
        return False
    if isinstance(v, SeqVar):
        return any(_mentions(i, target, depth - 1) for i in v.items)
    if isinstance(v, DictVar):
        return any(_mentions(i, target, depth - 1) for i in v.items.values())
    contents = getattr(v, "contents", None)  # a cell
    if contents is not None:
        return _mentions(contents, target, depth - 1)
    pending = getattr(v, "pending", None)  # an object's attributes set in the trace
    if isinstance(pending, dict):
        return any(_mentions(i, target, depth - 1) for i in pending.values())
    return False


def is_shared(tx, it: Var, args) -> bool:
    """``it`` (one of ``args``) is an iterator something other than this call can read."""
    if not isinstance(it, ListIteratorVar):
        return False
    if it.source is not None or sum(a is it for a in args) > 1:
        return True
    t = tx
    while t is not None:
        for v in [*t.stack, *t.locals.values(), *t.cells.values()]:
            if _mentions(v, it):
                return True
        t = t.parent
    return False


def any_shared(tx, args) -> bool:
    return any(is_shared(tx, a, args) for a in args)


def refuse_shared(tx, name, args):
    if any_shared(tx, args):
        raise Unsupported(f"{name}() over an iterator that other code also reads")


class LazyIterVar(ListIteratorVar):
    """Items made on demand by ``step(tx) -> Var | None``; rebuilt by ``rebuild(cg)``."""

    def __init__(self, name, step, rebuild):
        self.name = name
        self.step = step
        self.rebuild = rebuild
        self.items = []
        self.index = 0
        self.source = None
        self.base_index = 0

    def next(self, tx):
        return self.step(tx)

    def unpack(self, tx):
        out = []
        while (v := self.step(tx)) is not None:
            out.append(v)
        return out

    def reconstruct(self, cg):
        return self.rebuild(cg)

    def __repr__(self):
        return f"lazy {self.name}"


def _next(tx, it):
    if not isinstance(it, ListIteratorVar):
        raise Unsupported(f"stepping {it}")
    return it.next(tx)


def _rebuild_all(cg, vs):
    parts = [cg.rebuild(v) for v in vs]
    return lambda ctx: [p(ctx) for p in parts]


def lazy_zip(tx, its, strict=False):
    iters = [i.get_iter(tx) for i in its]

    def step(tx):
        row = []
        for it in iters:
            v = _next(tx, it)
            if v is None:
                if strict and (row or any(_next(tx, o) is not None for o in iters[1:])):
                    raise Unsupported("zip(strict=True) length mismatch")
                return None
            row.append(v)
        return TupleVar(row)

    def rebuild(cg):
        parts = _rebuild_all(cg, iters)
        return lambda ctx: zip(*parts(ctx), strict=strict) if strict else zip(*parts(ctx))

    return LazyIterVar("zip", step, rebuild)


def lazy_map(tx, fn, its):
    iters = [i.get_iter(tx) for i in its]

    def step(tx):
        row = []
        for it in iters:
            v = _next(tx, it)
            if v is None:
                return None
            row.append(v)
        return fn.call(tx, row, {})

    def rebuild(cg):
        f, parts = cg.rebuild(fn), _rebuild_all(cg, iters)
        return lambda ctx: map(f(ctx), *parts(ctx))

    return LazyIterVar("map", step, rebuild)


def lazy_filter(tx, fn, it, keep_true=True):
    it = it.get_iter(tx)
    plain = fn.is_const() and fn.const() is None

    def step(tx):
        while (v := _next(tx, it)) is not None:
            t = v.truth(tx) if plain else fn.call(tx, [v], {}).truth(tx)
            if t == keep_true:
                return v
        return None

    def rebuild(cg):
        f, i = cg.rebuild(fn), cg.rebuild(it)
        kind = filter if keep_true else itertools.filterfalse
        return lambda ctx: kind(f(ctx), i(ctx))

    return LazyIterVar("filter", step, rebuild)


def lazy_enumerate(tx, it, start):
    it = it.get_iter(tx)
    count = [start]

    def step(tx):
        v = _next(tx, it)
        if v is None:
            return None
        count[0] += 1
        return TupleVar([ConstVar(count[0] - 1), v])

    def rebuild(cg):
        i = cg.rebuild(it)
        return lambda ctx: enumerate(i(ctx), count[0])

    return LazyIterVar("enumerate", step, rebuild)


def lazy_islice(tx, it, start, stop, step_):
    """CPython's islice: ``cnt`` items taken, ``nxt`` the index of the next one to yield."""
    it = it.get_iter(tx)
    state = {"cnt": 0, "next": start}

    def step(tx):
        while state["cnt"] < state["next"]:
            if _next(tx, it) is None:
                return None
            state["cnt"] += 1
        if stop is not None and state["cnt"] >= stop:
            return None
        v = _next(tx, it)
        if v is None:
            return None
        state["cnt"] += 1
        state["next"] += step_
        if stop is not None and state["next"] > stop:
            state["next"] = stop
        return v

    def rebuild(cg):
        i = cg.rebuild(it)
        cnt, nxt = state["cnt"], state["next"]
        rest_stop = None if stop is None else max(stop - cnt, 0)
        rest_start = max(nxt - cnt, 0) if rest_stop is None else min(max(nxt - cnt, 0), rest_stop)
        return lambda ctx: itertools.islice(i(ctx), rest_start, rest_stop, step_)

    return LazyIterVar("islice", step, rebuild)


def lazy_chain(tx, iterables):
    pending = list(iterables)
    current = [None]

    def step(tx):
        while True:
            if current[0] is None:
                if not pending:
                    return None
                current[0] = pending.pop(0).get_iter(tx)
            v = _next(tx, current[0])
            if v is not None:
                return v
            current[0] = None

    def rebuild(cg):
        cur = cg.rebuild(current[0]) if current[0] is not None else None
        rest = _rebuild_all(cg, pending)
        return lambda ctx: itertools.chain(*([cur(ctx)] if cur else []), *rest(ctx))

    return LazyIterVar("chain", step, rebuild)
