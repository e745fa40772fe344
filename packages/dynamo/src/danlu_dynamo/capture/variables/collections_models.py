"""collections.deque, defaultdict and Counter: symbolic models (deque and defaultdict are C
types; Counter is Python, but its constructor and update go through a C helper and dict
subclass machinery the trace does not follow, so it is modelled on the dict value too).

Made in the frame they are rebuilt after the graph as the real type; passed in, they are the
same object afterwards with the trace's mutations replayed onto it.
"""

from __future__ import annotations

import collections
import operator

from ..exc import Unsupported
from .base import ConstVar, Var
from .containers import DictVar, ListIteratorVar, ListVar, SeqVar, TupleVar, note_mutation


def _int(v: Var, what: str) -> int:
    if not v.is_const() or not isinstance(v.const(), int):
        raise Unsupported(f"{what} must be a constant int")
    return v.const()


class DequeVar(SeqVar):
    py_type = collections.deque

    def __init__(self, items, maxlen=None, source=None):
        super().__init__([], source)
        self.maxlen = maxlen
        self.mutated = False
        self.version = 0  # every mutation: a live iterator fails its next step, as eager's
        for v in items:
            self._append(v)

    def get_iter(self, tx):
        return _DequeIterVar(self)

    def is_const(self):
        return False

    def _append(self, v, left=False):
        if self.maxlen == 0:
            return
        if left:
            self.items.insert(0, v)
            if self.maxlen is not None and len(self.items) > self.maxlen:
                self.items.pop()
        else:
            self.items.append(v)
            if self.maxlen is not None and len(self.items) > self.maxlen:
                self.items.pop(0)

    def getattr(self, tx, name):
        if name == "maxlen":
            return ConstVar(self.maxlen)
        return super().getattr(tx, name)

    def getitem(self, tx, idx):
        if not idx.is_const() or isinstance(idx.const(), slice):
            raise Unsupported("deque index that is not a constant int")
        return super().getitem(tx, idx)

    _MUTATING = {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "pop",
        "popleft",
        "rotate",
        "clear",
        "remove",
        "reverse",
        "insert",
        "__setitem__",
        "__delitem__",
        "__iadd__",
    }

    def call_method(self, tx, name, args, kwargs):
        from .builtins import compare_eq

        if kwargs:
            raise Unsupported(f"deque.{name} with keywords")
        if name in self._MUTATING:
            note_mutation(tx, self, "list")
            tx.output.side_effects.mutate(self)
            self.mutated = True
            self.version += 1
        items = self.items
        if name == "append" or name == "appendleft":
            self._append(args[0], left=name == "appendleft")
            return ConstVar(None)
        if name in ("extend", "extendleft", "__iadd__"):
            new = args[0].unpack(tx)  # a deque extended by itself: its items as they were
            for v in new:
                self._append(v, left=name == "extendleft")
            return self if name == "__iadd__" else ConstVar(None)
        if name in ("pop", "popleft"):
            if args:
                raise Unsupported(f"deque.{name} takes no arguments")
            if not items:
                raise Unsupported(f"IndexError from deque.{name}() of an empty deque")
            return items.pop() if name == "pop" else items.pop(0)
        if name == "rotate":
            n = _int(args[0], "rotate()") if args else 1
            if items:
                n %= len(items)
                self.items = items[-n:] + items[:-n] if n else items
            return ConstVar(None)
        if name == "clear":
            items.clear()
            return ConstVar(None)
        if name == "reverse":
            items.reverse()
            return ConstVar(None)
        if name == "insert":
            if self.maxlen is not None and len(items) >= self.maxlen:
                raise Unsupported("IndexError: deque already at its maximum size")
            items.insert(_int(args[0], "insert()"), args[1])
            return ConstVar(None)
        if name == "remove":
            for i, v in enumerate(items):
                if compare_eq(tx, v, args[0]):
                    del items[i]
                    return ConstVar(None)
            raise Unsupported("ValueError from deque.remove")
        if name == "__setitem__":
            items[_int(args[0], "deque index")] = args[1]
            return ConstVar(None)
        if name == "__delitem__":
            del items[_int(args[0], "deque index")]
            return ConstVar(None)
        if name == "copy":
            return DequeVar(list(items), self.maxlen)
        if name == "__iter__":
            return self.get_iter(tx)
        if name == "__reversed__":
            return ListIteratorVar(list(reversed(items)))
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        parts = [cg.rebuild(i) for i in self.items]
        n = self.maxlen
        return lambda ctx: collections.deque([p(ctx) for p in parts], n)

    def replay_mutation(self, cg):
        """(inputs, apply) for the replays: the deque's final items, in place."""
        obj = cg.from_source(self.source)
        parts = [cg.rebuild(i) for i in self.items]

        def apply(p):
            p[0].clear()
            p[0].extend(p[1])

        return (lambda ctx: (obj(ctx), [q(ctx) for q in parts])), apply

    def __repr__(self):
        return f"deque({self.items!r}, maxlen={self.maxlen})"


class _DequeIterVar(ListIteratorVar):
    """iter(deque): fails at its next step once the deque was mutated (eager raises
    RuntimeError then; the rebuilt iterator does too)."""

    def __init__(self, deque_var: DequeVar):
        super().__init__(list(deque_var.items))
        self.deque_var = deque_var
        self.version = deque_var.version

    def _stale(self):
        return self.deque_var.version != self.version

    def next(self, tx):
        if self._stale():
            raise Unsupported(_DEQUE_MUTATED)
        return super().next(tx)

    def unpack(self, tx):
        if self._stale():
            raise Unsupported(_DEQUE_MUTATED)
        return super().unpack(tx)

    def reconstruct(self, cg):
        from .dict_views import _RaisingIterator

        if self._stale():
            return lambda ctx: _RaisingIterator(_DEQUE_MUTATED)
        if self.deque_var.source is not None and self.deque_var.mutated:
            return super().reconstruct(cg)  # replayed after the rebuild: a plain iterator
        d, n = cg.rebuild(self.deque_var), self.index

        def real(ctx):  # the real iterator, so eager code that mutates the deque sees it
            it = iter(d(ctx))
            for _ in range(n):
                next(it)
            return it

        return real


_DEQUE_MUTATED = "deque mutated during iteration"


def _deque(tx, iterable=None, maxlen=None):
    n = None if maxlen is None or (maxlen.is_const() and maxlen.const() is None) else maxlen
    n = _int(n, "deque maxlen") if n is not None else None
    if n is not None and n < 0:
        raise Unsupported("ValueError: maxlen must be non-negative")
    return DequeVar(iterable.unpack(tx) if iterable is not None else [], n)


class DefaultDictVar(DictVar):
    def __init__(self, items, factory: Var, source=None):
        super().__init__(items, source, py_type=collections.defaultdict)
        self.factory = factory

    def getattr(self, tx, name):
        if name == "default_factory":
            return self.factory
        return super().getattr(tx, name)

    def getitem(self, tx, key):
        k = self._key(tx, key)
        if k not in self.items:
            if self.factory.is_const() and self.factory.const() is None:
                raise Unsupported(f"KeyError {k!r} while tracing")
            value = self.factory.call(tx, [], {})  # __missing__: made and stored
            self._mut(tx)
            self.items[k] = value
        return self.items[k]

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "copy":
            return DefaultDictVar(self.items, self.factory)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        f = cg.rebuild(self.factory)
        parts = {k: cg.rebuild(v) for k, v in self.items.items()}
        return lambda ctx: collections.defaultdict(f(ctx), {k: p(ctx) for k, p in parts.items()})


def _defaultdict(tx, factory=None, *args, **kwargs):
    if factory is None:
        factory = ConstVar(None)
    base = DictVar({})
    if args or kwargs:
        base.call_method(tx, "update", list(args), kwargs)
    return DefaultDictVar(base.items, factory)


class CounterVar(DictVar):
    def __init__(self, items, source=None):
        super().__init__(items, source, py_type=collections.Counter)

    def getattr(self, tx, name):
        from .functions import BoundVarMethod

        if name in ("most_common", "elements", "total", "subtract"):
            return BoundVarMethod(self, name)
        return super().getattr(tx, name)

    def getitem(self, tx, key):
        k = self._key(tx, key)
        return self.items.get(k, ConstVar(0))  # __missing__: 0, not stored

    def _count(self, tx, other, sign):
        from .builtins import binary_op

        if isinstance(other, DictVar):
            pairs = list(other.items.items())
        else:
            pairs = [(self._key(tx, v), ConstVar(1)) for v in other.unpack(tx)]
        if pairs:
            self._mut(tx)
        op = operator.add if sign > 0 else operator.sub
        for k, n in pairs:
            self.items[k] = binary_op(tx, op, self.items.get(k, ConstVar(0)), n)

    def _counts(self):
        vals = [v.const() if v.is_const() else None for v in self.items.values()]
        if any(v is None for v in vals):
            raise Unsupported("Counter with counts that are not constants")
        return dict(zip(self.items, vals))

    def call_method(self, tx, name, args, kwargs):
        from .dict_views import key_var

        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name in ("update", "subtract"):
            if args:
                self._count(tx, args[0], 1 if name == "update" else -1)
            if kwargs:
                self._count(tx, DictVar(kwargs), 1 if name == "update" else -1)
            return ConstVar(None)
        if name == "most_common":
            none = not args or (args[0].is_const() and args[0].const() is None)
            n = None if none else _int(args[0], "most_common(n)")
            ranked = collections.Counter(self._counts()).most_common(n)
            return ListVar([TupleVar([key_var(tx.output, k), self.items[k]]) for k, _ in ranked])
        if name == "elements":
            counts = self._counts()
            return ListIteratorVar(
                [key_var(tx.output, k) for k, c in counts.items() for _ in range(max(c, 0))]
            )
        if name == "total":
            return ConstVar(sum(self._counts().values()))
        if name == "copy":
            return CounterVar(self.items)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        parts = {k: cg.rebuild(v) for k, v in self.items.items()}
        return lambda ctx: collections.Counter({k: p(ctx) for k, p in parts.items()})


def _counter(tx, iterable=None, **kwargs):
    c = CounterVar({})
    if iterable is not None:
        c._count(tx, iterable, 1)
    if kwargs:
        c._count(tx, DictVar(kwargs), 1)
    c.mutated = False
    return c


def _ordered_dict(tx, *args, **kwargs):
    from .builtins import _dict

    d = _dict(tx, *args, **kwargs)
    d.py_type = collections.OrderedDict
    return d


def _fromkeys(cls):
    def h(tx, keys, value=None):
        from .dict_views import dict_key

        v = value if value is not None else ConstVar(None)
        items = {dict_key(tx, k): v for k in keys.unpack(tx)}
        if cls is collections.Counter:
            raise Unsupported("Counter.fromkeys is not implemented (NotImplementedError)")
        if cls is collections.defaultdict:
            return DefaultDictVar(items, ConstVar(None))
        return DictVar(items, py_type=cls)

    return h


COLLECTIONS = {
    collections.deque: (_deque, None),
    collections.defaultdict: (_defaultdict, {"fromkeys": _fromkeys(collections.defaultdict)}),
    collections.Counter: (_counter, {"fromkeys": _fromkeys(collections.Counter)}),
    collections.OrderedDict: (_ordered_dict, {"fromkeys": _fromkeys(collections.OrderedDict)}),
    dict: (None, {"fromkeys": _fromkeys(dict)}),
}
