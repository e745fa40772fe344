"""Symbolic models of C-implemented standard-library helpers: itertools, functools.reduce,
operator.itemgetter/attrgetter, and the ``key=`` of sorted/min/max/list.sort.

These are written in C, so there is no Python body to inline: each model computes, from the
symbolic items, what the real helper would produce, and returns an iterator over those items
(``ListIteratorVar``, run to completion like the generators the trace inlines). Orders and
groupings are decided by running the real helper on item *positions* or on constant keys, so
they are eager's by construction. The infinite iterators (count, cycle, repeat without
``times``) yield lazily; consuming one to the end is refused. A groupby group is valid only
until its groupby advances, as in eager.
"""

from __future__ import annotations

import functools
import itertools
import operator

from ..exc import Unsupported
from .base import ConstVar, Var
from .containers import ListIteratorVar, ListVar, TupleVar
from .lazy_iter import any_shared, lazy_chain, lazy_filter, lazy_islice, refuse_shared


def _items(tx, v: Var) -> list:
    return v.unpack(tx)


def _all_of(tx, name, v: Var) -> list:
    """The items of ``v`` for a helper that is lazy in eager: ``v`` must not be an iterator
    other code also reads (taking all its items now would take theirs)."""
    refuse_shared(tx, f"itertools.{name}", [v])
    return v.unpack(tx)


def _const(v: Var, what: str):
    if v is None:
        return None
    if not v.is_const():
        raise Unsupported(f"{what} must be a constant")
    return v.const()


def _pick(items: list, index_tuples) -> ListIteratorVar:
    """Tuples of items chosen by position (product, combinations, permutations)."""
    return ListIteratorVar([TupleVar([items[i] for i in t]) for t in index_tuples])


MAX_ITEMS = 100_000  # a bound on items drawn from infinite iterators in one trace


class InfiniteIterVar(ListIteratorVar):
    """count(), cycle(), repeat(x): item ``i`` made on demand."""

    def __init__(self, name, item, rebuild):
        self.name = name
        self.item = item  # i -> Var
        self.rebuild_at = rebuild  # (cg, index) -> ctx -> iterator
        self.items = []
        self.index = 0
        self.source = None
        self.base_index = 0

    def next(self, tx):
        if self.index >= MAX_ITEMS:
            raise Unsupported(f"itertools.{self.name}() drawn from {MAX_ITEMS} times")
        v = self.item(self.index)
        self.index += 1
        return v

    def unpack(self, tx):
        raise Unsupported(f"itertools.{self.name}() iterated to the end (it never ends)")

    def reconstruct(self, cg):
        return self.rebuild_at(cg, self.index)

    def __repr__(self):
        return f"itertools.{self.name}(at {self.index})"


# ------------------------------------------------------------------ itertools


def _chain(tx, *its):
    if any_shared(tx, its):
        return lazy_chain(tx, its)
    return ListIteratorVar([v for it in its for v in _items(tx, it)])


def _chain_from_iterable(tx, it):
    subs = _all_of(tx, "chain.from_iterable", it)
    if any_shared(tx, subs):
        return lazy_chain(tx, subs)
    return ListIteratorVar([v for sub in subs for v in _items(tx, sub)])


def _product(tx, *its, repeat=None):
    lists = [_items(tx, it) for it in its]
    n = _const(repeat, "product(repeat=)") if repeat is not None else 1
    lists = lists * n
    flat = [v for lst in lists for v in lst]
    offsets = list(itertools.accumulate([0] + [len(lst) for lst in lists]))
    ranges = [range(o, o + len(lst)) for o, lst in zip(offsets, lists)]
    return _pick(flat, itertools.product(*ranges))


def _positions(fn):
    def h(tx, it, *args, **kw):
        items = _items(tx, it)
        a = [_const(x, f"{fn.__name__}() arguments") for x in args]
        k = {n: _const(x, f"{fn.__name__}() arguments") for n, x in kw.items()}
        try:
            chosen = list(fn(range(len(items)), *a, **k))
        except (TypeError, ValueError) as e:
            raise Unsupported(f"{type(e).__name__} from itertools.{fn.__name__}()") from e
        return _pick(items, chosen)

    return h


def _zip_longest(tx, *its, fillvalue=None):
    refuse_shared(tx, "itertools.zip_longest", its)
    lists = [_items(tx, it) for it in its]
    fill = fillvalue if fillvalue is not None else ConstVar(None)
    n = max((len(lst) for lst in lists), default=0)
    return ListIteratorVar(
        [TupleVar([lst[i] if i < len(lst) else fill for lst in lists]) for i in range(n)]
    )


def _accumulate(tx, it, func=None, *, initial=None):
    from .builtins import binary_op

    items = _all_of(tx, "accumulate", it)
    if func is not None and func.is_const() and func.const() is None:
        func = None
    if initial is not None and initial.is_const() and initial.const() is None:
        initial = None
    out = []
    acc = initial
    if acc is not None:
        out.append(acc)
    for v in items:
        if acc is None:
            acc = v
        elif func is None:
            acc = binary_op(tx, operator.add, acc, v)
        else:
            acc = func.call(tx, [acc, v], {})
        out.append(acc)
    return ListIteratorVar(out)


def _islice(tx, it, *args):
    bounds = [_const(a, "islice() bounds") for a in args]
    try:
        sl = slice(*bounds) if len(bounds) > 1 else slice(bounds[0])
        itertools.islice((), *bounds)  # eager's argument checks
    except (TypeError, ValueError) as e:
        raise Unsupported(f"{type(e).__name__} from itertools.islice()") from e
    start, stop, step = sl.start or 0, sl.stop, sl.step or 1
    if any_shared(tx, [it]):
        return lazy_islice(tx, it, start, stop, step)
    source = it.get_iter(tx)
    if stop is None and isinstance(source, InfiniteIterVar):
        raise Unsupported(f"islice() without a stop over itertools.{source.name}() never ends")
    out = []
    i = 0
    while stop is None or i < stop:  # eager consumes up to ``stop`` items, no further
        v = source.next(tx) if isinstance(source, ListIteratorVar) else None
        if v is None:
            if not isinstance(source, ListIteratorVar):
                raise Unsupported(f"islice() over {source}")
            break
        if i >= start and (i - start) % step == 0:
            out.append(v)
        i += 1
    return ListIteratorVar(out)


def _repeat(tx, obj, times=None):
    if times is not None:
        return ListIteratorVar([obj] * max(_const(times, "repeat(times=)"), 0))

    def rebuild(cg, index):
        o = cg.rebuild(obj)
        return lambda ctx: itertools.repeat(o(ctx))

    return InfiniteIterVar("repeat", lambda i: obj, rebuild)


def _count(tx, start=None, step=None):
    s = _const(start, "count() start") if start is not None else 0
    d = _const(step, "count() step") if step is not None else 1

    def rebuild(cg, index):
        return lambda ctx: itertools.count(s + index * d, d)

    return InfiniteIterVar("count", lambda i: ConstVar(s + i * d), rebuild)


def _cycle(tx, it):
    items = _all_of(tx, "cycle", it)
    if not items:
        return ListIteratorVar([])

    def rebuild(cg, index):
        k = index % len(items)
        parts = [cg.rebuild(v) for v in items[k:] + items[:k]]
        return lambda ctx: itertools.cycle([p(ctx) for p in parts])

    return InfiniteIterVar("cycle", lambda i: items[i % len(items)], rebuild)


def _pairwise(tx, it):
    items = _all_of(tx, "pairwise", it)
    return ListIteratorVar([TupleVar([a, b]) for a, b in zip(items, items[1:])])


def _starmap(tx, fn, it):
    rows = _all_of(tx, "starmap", it)
    return ListIteratorVar([fn.call(tx, _items(tx, args), {}) for args in rows])


def _while(take: bool):
    def h(tx, pred, it):
        out = []
        items = _all_of(tx, "takewhile" if take else "dropwhile", it)
        for i, v in enumerate(items):
            if not pred.call(tx, [v], {}).truth(tx):
                return ListIteratorVar(out if take else items[i:])
            out.append(v)
        return ListIteratorVar(out if take else [])

    return h


def _compress(tx, data, selectors):
    refuse_shared(tx, "itertools.compress", [data, selectors])
    pairs = zip(_items(tx, data), _items(tx, selectors))
    return ListIteratorVar([d for d, s in pairs if s.truth(tx)])


def _filterfalse(tx, pred, it):
    if any_shared(tx, [it]):
        return lazy_filter(tx, pred, it, keep_true=False)
    keep = []
    for v in _items(tx, it):
        t = v.truth(tx) if pred.is_const() and pred.const() is None else None
        if t is None:
            t = pred.call(tx, [v], {}).truth(tx)
        if not t:
            keep.append(v)
    return ListIteratorVar(keep)


class GroupByVar(ListIteratorVar):
    """itertools.groupby: groups found up front from constant keys; each group iterator is
    valid only while it is the current group (eager's groupby shares one underlying iterator)."""

    def __init__(self, items, keys, bounds, key_fn):
        self.all_items = items
        self.keys = keys  # Var per group
        self.bounds = bounds  # (start, end) per group
        self.key_fn = key_fn
        self.items = []
        self.index = 0  # groups handed out
        self.source = None
        self.base_index = 0

    def next(self, tx):
        if self.index >= len(self.bounds):
            self.index = len(self.bounds) + 1  # the last group is no longer current
            return None
        g = _GroupVar(self, self.index)
        k = self.keys[self.index]
        self.index += 1
        return TupleVar([k, g])

    def unpack(self, tx):
        out = []
        while (v := self.next(tx)) is not None:
            out.append(v)
        return out

    def reconstruct(self, cg):
        start = self.bounds[self.index][0] if self.index < len(self.bounds) else None
        rest = [cg.rebuild(v) for v in self.all_items[start:]] if start is not None else []
        key = cg.rebuild(self.key_fn) if self.key_fn is not None else None
        return lambda ctx: itertools.groupby(
            [p(ctx) for p in rest], key(ctx) if key is not None else None
        )


class _GroupVar(ListIteratorVar):
    def __init__(self, parent: GroupByVar, group: int):
        self.parent = parent
        self.group = group
        self.items = []
        self.index = 0
        self.source = None
        self.base_index = 0

    def _rest(self):
        if self.parent.index != self.group + 1:
            return []  # the groupby moved on: eager's group iterator is empty now
        start, end = self.parent.bounds[self.group]
        return self.parent.all_items[start + self.index : end]

    def next(self, tx):
        rest = self._rest()
        if not rest:
            return None
        self.index += 1
        return rest[0]

    def unpack(self, tx):
        rest = self._rest()
        self.index += len(rest)
        return rest

    def reconstruct(self, cg):
        parts = [cg.rebuild(v) for v in self._rest()]
        return lambda ctx: iter([p(ctx) for p in parts])


def _groupby(tx, it, key=None):
    from .builtins import compare_eq

    items = _all_of(tx, "groupby", it)
    if key is not None and key.is_const() and key.const() is None:
        key = None
    keys = [key.call(tx, [v], {}) if key is not None else v for v in items]
    group_keys, bounds = [], []
    for i, k in enumerate(keys):
        if not group_keys or not compare_eq(tx, group_keys[-1], k):
            group_keys.append(k)
            bounds.append([i, i + 1])
        else:
            bounds[-1][1] = i + 1
    return GroupByVar(items, group_keys, [tuple(b) for b in bounds], key)


# ------------------------------------------------------------------ functools, operator


def _reduce(tx, fn, it, *initial):
    items = _items(tx, it)
    if initial:
        acc = initial[0]
    elif items:
        acc, items = items[0], items[1:]
    else:
        raise Unsupported("TypeError from reduce() of an empty iterable with no initial value")
    for v in items:
        acc = fn.call(tx, [acc, v], {})
    return acc


class _GetterVar(Var):
    """operator.itemgetter(...) / attrgetter(...) made in the trace."""

    def __init__(self, real, kind, keys):
        self.real = real
        self.kind = kind
        self.keys = keys

    def python_type(self):
        return type(self.real)

    def _one(self, tx, obj, k):
        if self.kind == "item":
            return tx.getitem(obj, ConstVar(k))
        for part in k.split("."):
            obj = tx.getattr_checked(obj, part)
        return obj

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.kind}getter called with these arguments")
        vals = [self._one(tx, args[0], k) for k in self.keys]
        return vals[0] if len(vals) == 1 else TupleVar(vals)

    def reconstruct(self, cg):
        r = self.real
        return lambda ctx: r


def _getter(kind, cls):
    def h(tx, *args, **kw):
        if kw or not args or not all(a.is_const() for a in args):
            raise Unsupported(f"{cls.__name__}() of non-constants")
        keys = [a.const() for a in args]
        if kind == "attr" and not all(isinstance(k, str) for k in keys):
            raise Unsupported("attrgetter() of a non-string")
        return _GetterVar(cls(*keys), kind, keys)

    return h


# ------------------------------------------------------------------ key= orders


def order_by_key(tx, items: list, key, reverse) -> list:
    """``items`` sorted as ``sorted(items, key=key, reverse=reverse)`` sorts them."""
    rev = reverse.truth(tx) if reverse is not None else False
    if key is not None and key.is_const() and key.const() is None:
        key = None
    keys = [key.call(tx, [v], {}) if key is not None else v for v in items]
    if not all(k.is_const() for k in keys):
        raise Unsupported("sorting by non-constant keys (tensors: depends on data)")
    vals = [k.const() for k in keys]
    try:
        order = sorted(range(len(items)), key=vals.__getitem__, reverse=rev)
    except TypeError as e:
        raise Unsupported(f"TypeError comparing sort keys: {e}") from e
    return [items[i] for i in order]


def _sorted(tx, it, *, key=None, reverse=None):
    return ListVar(order_by_key(tx, _items(tx, it), key, reverse))


def _minmax_key(fn):
    def h(tx, *args, key=None, default=None):
        items = _items(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if default is not None:
                return default
            raise Unsupported(f"ValueError from {fn.__name__}() of an empty sequence")
        if key is None:
            return None  # the plain handler
        keys = [key.call(tx, [v], {}) for v in items]
        if not all(k.is_const() for k in keys):
            raise Unsupported(f"{fn.__name__}() by non-constant keys")
        vals = [k.const() for k in keys]
        i = fn(range(len(items)), key=vals.__getitem__)
        return items[i]

    return h


class StdlibClassVar(Var):
    """A C class of the standard library with a model (itertools.chain, deque, ...): calls
    and the class attributes listed in ``attrs`` go to the models."""

    def __init__(self, cls, call, attrs=None):
        self.cls = cls
        self.call_model = call
        self.attrs = attrs or {}

    def is_const(self):
        return True

    def const(self):
        return self.cls

    def python_type(self):
        return type(self.cls)

    def call(self, tx, args, kwargs):
        return self.call_model(tx, *args, **kwargs)

    def getattr(self, tx, name):
        if name in self.attrs:
            return _ModelFn(self.attrs[name], f"{self.cls.__name__}.{name}")
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstVar(getattr(self.cls, name))
        raise Unsupported(f"attribute {name} of {self.cls.__name__}")

    def reconstruct(self, cg):
        c = self.cls
        return lambda ctx: c

    def __repr__(self):
        return f"StdlibClass({self.cls.__name__})"


class TupleNewVar(Var):
    """``tuple.__new__(cls, iterable)`` (namedtuple's ``_make`` is written with it)."""

    def call(self, tx, args, kwargs):
        if len(args) not in (1, 2) or kwargs or not args[0].is_const():
            raise Unsupported("tuple.__new__ with these arguments")
        cls = args[0].const()
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise Unsupported("tuple.__new__ of a non-tuple class")
        if cls is not tuple and not hasattr(cls, "_fields"):
            raise Unsupported(f"tuple.__new__ of {cls.__name__}")
        items = _items(tx, args[1]) if len(args) > 1 else []
        return TupleVar(items, py_type=cls)

    def reconstruct(self, cg):
        return lambda ctx: tuple.__new__


class _ModelFn(Var):
    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def call(self, tx, args, kwargs):
        return self.fn(tx, *args, **kwargs)


ITERTOOLS = {
    itertools.chain: (_chain, {"from_iterable": _chain_from_iterable}),
    itertools.product: (_product, None),
    itertools.combinations: (_positions(itertools.combinations), None),
    itertools.combinations_with_replacement: (
        _positions(itertools.combinations_with_replacement),
        None,
    ),
    itertools.permutations: (_positions(itertools.permutations), None),
    itertools.zip_longest: (_zip_longest, None),
    itertools.accumulate: (_accumulate, None),
    itertools.islice: (_islice, None),
    itertools.repeat: (_repeat, None),
    itertools.count: (_count, None),
    itertools.cycle: (_cycle, None),
    itertools.starmap: (_starmap, None),
    itertools.takewhile: (_while(True), None),
    itertools.dropwhile: (_while(False), None),
    itertools.compress: (_compress, None),
    itertools.filterfalse: (_filterfalse, None),
    itertools.groupby: (_groupby, None),
}
if hasattr(itertools, "pairwise"):
    ITERTOOLS[itertools.pairwise] = (_pairwise, None)
ITERTOOLS[operator.itemgetter] = (_getter("item", operator.itemgetter), None)
ITERTOOLS[operator.attrgetter] = (_getter("attr", operator.attrgetter), None)


def stdlib_class_var(cls):
    """The model of a standard-library class, or None."""
    from .collections_models import COLLECTIONS

    hit = ITERTOOLS.get(cls) or COLLECTIONS.get(cls)
    if hit is None:
        return None
    return StdlibClassVar(cls, hit[0], hit[1])


def install_function_models(handlers: dict):
    """Builtins and C functions of the standard library handled by ``BuiltinVar.call``."""
    plain_min, plain_max = handlers.get(min), handlers.get(max)

    def with_key(model, plain):
        def h(tx, *args, **kw):
            r = model(tx, *args, **kw)
            return r if r is not None else plain(tx, *args)

        return h

    handlers[functools.reduce] = _reduce
    handlers[sorted] = _sorted
    handlers[min] = with_key(_minmax_key(min), plain_min)
    handlers[max] = with_key(_minmax_key(max), plain_max)
