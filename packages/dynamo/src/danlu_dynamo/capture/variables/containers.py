"""Tuples, lists, dicts, sets, slices and iterators over them."""

from __future__ import annotations

import collections
import dataclasses
import inspect
import types

import torch

from ..exc import Unsupported
from .base import ConstVar, Var, is_const_value


def _const_index(v: Var):
    if not v.is_const():
        raise Unsupported(f"non-constant index {v}")
    return v.const()


class SeqVar(Var):
    py_type: type = tuple

    def __init__(self, items, source=None, py_type=None):
        self.items = list(items)
        self.source = source
        if py_type is not None:
            self.py_type = py_type

    def python_type(self):
        return self.py_type

    def is_const(self):
        return all(i.is_const() for i in self.items) and self.py_type in (tuple, list, torch.Size)

    def const(self):
        vals = [i.const() for i in self.items]
        if self.py_type is torch.Size:  # symbolic sizes (dynamic shapes), specialised here
            return torch.Size(vals)
        return tuple(vals) if self.py_type is tuple else vals

    def truth(self, tx):
        return len(self.items) > 0

    def unpack(self, tx):
        return list(self.items)

    def getitem(self, tx, idx: Var):
        i = _const_index(idx)
        if isinstance(i, slice):
            keep = self.py_type in (tuple, list, torch.Size)
            return type(self)(self.items[i], py_type=self.py_type if keep else tuple)
        if isinstance(i, bool) or not isinstance(i, int):
            raise Unsupported(f"sequence index {type(i).__name__}")
        try:
            return self.items[i]
        except IndexError as e:
            raise Unsupported("IndexError while tracing") from e

    def call_method(self, tx, name, args, kwargs):
        from .builtins import compare_eq

        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstVar(len(self.items))
        if name == "index" and len(args) == 1:
            for i, it in enumerate(self.items):
                if compare_eq(tx, it, args[0]):
                    return ConstVar(i)
            raise Unsupported("ValueError from index()")
        if name == "count" and len(args) == 1:
            return ConstVar(sum(1 for it in self.items if compare_eq(tx, it, args[0])))
        if name == "__contains__":
            return ConstVar(any(compare_eq(tx, it, args[0]) for it in self.items))
        if name in _NAMEDTUPLE_MODELS and hasattr(self.py_type, "_fields"):
            return self._namedtuple_method(tx, name, args, kwargs)
        raise Unsupported(f"{self.py_type.__name__}.{name}")

    def _namedtuple_method(self, tx, name, args, kwargs):
        fields = self.py_type._fields
        if name == "_asdict" and not args and not kwargs:
            return DictVar(dict(zip(fields, self.items)))
        if name == "_replace" and not args:
            unknown = set(kwargs) - set(fields)
            if unknown:
                raise Unsupported(f"ValueError from _replace: unexpected fields {sorted(unknown)}")
            items = [kwargs.get(f, v) for f, v in zip(fields, self.items)]
            return TupleVar(items, py_type=self.py_type)
        if name == "_make" and len(args) == 1 and not kwargs:
            items = args[0].unpack(tx)
            if len(items) != len(fields):
                raise Unsupported(f"TypeError from _make: expected {len(fields)} arguments")
            return TupleVar(items, py_type=self.py_type)
        raise Unsupported(f"{self.py_type.__name__}.{name} with these arguments")

    def getattr(self, tx, name):
        from .functions import BoundVarMethod

        if name in ("_fields",) and hasattr(self.py_type, "_fields"):
            return ConstVar(self.py_type._fields)
        if hasattr(self.py_type, "_fields") and name in self.py_type._fields:
            return self.items[self.py_type._fields.index(name)]
        if hasattr(self.py_type, "_fields") and name not in _NAMEDTUPLE_MODELS:
            attr = inspect.getattr_static(self.py_type, name, None)
            if isinstance(attr, types.FunctionType):  # a method of a typing.NamedTuple
                from .functions import BoundMethodVar, UserFunctionVar

                return BoundMethodVar(UserFunctionVar(attr), self)
            if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
                from .functions import UserFunctionVar

                return UserFunctionVar(attr.fget).call(tx, [self], {})
            if name == "_field_defaults":
                return tx.output.wrap_const(attr)
        return BoundVarMethod(self, name)

    def reconstruct(self, cg):
        if self.source is not None and self.py_type is not tuple:
            # A list from the frame state is the same object afterwards (code may hold other
            # references to it); the trace's mutations of it are replayed onto it.
            return cg.from_source(self.source)
        parts = [cg.rebuild(i) for i in self.items]
        t = self.py_type
        if t is tuple:
            return lambda ctx: tuple(p(ctx) for p in parts)
        if t is list:
            return lambda ctx: [p(ctx) for p in parts]
        if hasattr(t, "_fields"):  # namedtuple
            return lambda ctx: t(*[p(ctx) for p in parts])
        return lambda ctx: t([p(ctx) for p in parts])

    def __repr__(self):
        if getattr(self, "lazy", None) is not None:
            return f"list(append-only, {self.source})"
        return f"{self.py_type.__name__}{self.items!r}"


# namedtuple methods followed by a symbolic model (their code builds tuples through
# tuple.__new__ and classmethods)
_NAMEDTUPLE_MODELS = ("_replace", "_asdict", "_make")


def _alias_sets(out, kind):
    """(containers of ``kind`` reached from the frame state, the ones the trace mutated)."""
    reg = out.__dict__.setdefault("_frame_containers", {})
    return reg.setdefault(kind, ([], []))


def _guard_distinct(out, a, b):
    x, y = a.source.expr, b.source.expr
    out.guards.add("ALIAS", x, f"{x} is not {y}", (y,))


def note_frame_container(out, var, kind):
    """``var`` (with a source) was wrapped: it must not be a container the trace mutates."""
    seen, mutated = _alias_sets(out, kind)
    for m in mutated:
        _guard_distinct(out, var, m)
    seen.append(var)


def note_mutation(tx, var, kind):
    """Mutations are replayed container by container after the graph, and reads of other
    containers were traced as if unaffected: guard that no other container of the frame state
    is this one at run time (two sources can reach one object)."""
    if var.source is None:
        return
    seen, mutated = _alias_sets(tx.output, kind)
    if any(m is var for m in mutated):
        return
    for o in seen:
        if o is not var:
            _guard_distinct(tx.output, var, o)
    mutated.append(var)


class TupleVar(SeqVar):
    py_type = tuple


class ListVar(SeqVar):
    py_type = list

    # A list from the frame state starts *append-only*: its length and items are neither read
    # nor guarded until the trace first reads them (``items``); appends before that are replayed
    # as ``extend`` on the list as it is then, so a list that only grows does not recompile.
    lazy = None  # (OutputGraph, the real list) while append-only
    appended: list

    def __init__(self, items, source=None, py_type=None):
        super().__init__(items, source, py_type)
        self.mutated = False
        self.appended = []

    @classmethod
    def append_only(cls, out, value, source):
        var = cls([], source)
        var.lazy = (out, value)
        note_frame_container(out, var, "list")
        return var

    @property
    def items(self):
        if self.lazy is not None:
            out, value = self.lazy
            self.lazy = None
            out.guards.length(self.source.expr, value)
            self._items = [
                out.wrap(v, self.source.item(i)) for i, v in enumerate(value)
            ] + self.appended
            self.appended = []
        return self._items

    @items.setter
    def items(self, value):
        self._items = value

    def is_const(self):
        return False

    def get_iter(self, tx):
        return ListLiveIterVar(self)

    def call_method(self, tx, name, args, kwargs):
        if self.lazy is not None and name in ("append", "extend", "__iadd__"):
            if len(args) != 1 or kwargs:
                raise Unsupported(f"list.{name} arguments")
            new = [args[0]] if name == "append" else args[0].unpack(tx)
            note_mutation(tx, self, "list")
            tx.output.side_effects.mutate(self)
            self.mutated = True
            if self.lazy is not None:
                self.appended.extend(new)
            else:  # reading the argument read this list (``lst.extend(lst)``)
                self._items.extend(new)
            return self if name == "__iadd__" else ConstVar(None)
        mutating = {
            "append",
            "extend",
            "insert",
            "pop",
            "clear",
            "reverse",
            "__setitem__",
            "__delitem__",
            "remove",
            "sort",
            "__iadd__",
            "__imul__",
        }
        if name in mutating:
            note_mutation(tx, self, "list")
            tx.output.side_effects.mutate(self)
            self.mutated = True
        if name == "append":
            self.items.append(args[0])
            return ConstVar(None)
        if name in ("extend", "__iadd__"):
            self.items.extend(args[0].unpack(tx))
            return self if name == "__iadd__" else ConstVar(None)
        if name == "__imul__":
            n = _const_index(args[0])
            if isinstance(n, bool) or not isinstance(n, int):
                raise Unsupported("list *= a non-int")
            self.items[:] = self.items * n
            return self
        if name == "insert":
            self.items.insert(_const_index(args[0]), args[1])
            return ConstVar(None)
        if name == "pop":
            i = _const_index(args[0]) if args else -1
            return self.items.pop(i)
        if name == "clear":
            self.items.clear()
            return ConstVar(None)
        if name == "reverse":
            self.items.reverse()
            return ConstVar(None)
        if name == "copy":
            return ListVar(list(self.items))
        if name == "__setitem__":
            i = _const_index(args[0])
            if isinstance(i, slice):
                self.items[i] = args[1].unpack(tx)
            else:
                self.items[i] = args[1]
            return ConstVar(None)
        if name == "__delitem__":
            del self.items[_const_index(args[0])]
            return ConstVar(None)
        if name == "sort":
            from .stdlib_models import order_by_key

            if args or set(kwargs) - {"key", "reverse"}:
                raise Unsupported("list.sort arguments")
            self.items = order_by_key(tx, self.items, kwargs.get("key"), kwargs.get("reverse"))
            return ConstVar(None)
        if name == "remove":
            from .builtins import compare_eq

            for i, it in enumerate(self.items):
                if compare_eq(tx, it, args[0]):
                    del self.items[i]
                    return ConstVar(None)
            raise Unsupported("ValueError from list.remove")
        return super().call_method(tx, name, args, kwargs)


class DictVar(Var):
    """A dict (or OrderedDict, ModelOutput-style subclass). ``items`` maps the real keys
    (``dict_views.dict_key``: constants, enum members, classes, functions, modules, tuples of
    those) to symbolic values, in insertion order."""

    def __init__(self, items: dict, source=None, py_type=dict):
        self.items = dict(items)  # real key -> Var
        self.source = source
        self.py_type = py_type
        self.mutated = False

    def python_type(self):
        return self.py_type

    def truth(self, tx):
        return len(self.items) > 0

    def unpack(self, tx):
        from .dict_views import key_var

        return [key_var(tx.output, k) for k in self.items]

    def get_iter(self, tx):
        from .dict_views import DictIterVar

        return DictIterVar(tx, self, "keys")

    def _key(self, tx, v):
        from .dict_views import dict_key

        return dict_key(tx, v)

    def getitem(self, tx, key: Var):
        k = self._key(tx, key)
        if k not in self.items:
            raise Unsupported(f"KeyError {k!r} while tracing")
        return self.items[k]

    def getattr(self, tx, name):
        from .functions import BoundVarMethod

        if self.py_type is not dict and name not in dir(dict):
            # ModelOutput-style dict subclasses expose keys as attributes.
            if name in self.items:
                return self.items[name]
            if issubclass(self.py_type, collections.OrderedDict) and getattr(
                self.py_type, name, None
            ) is getattr(collections.OrderedDict, name, 0):
                return BoundVarMethod(self, name)  # move_to_end
            v = getattr(self.py_type, name, None)
            if name == "to_tuple" and getattr(v, "__qualname__", "") == "ModelOutput.to_tuple":
                return BoundVarMethod(self, name)  # transformers' own: see call_method
            if v is None or callable(v):
                if name in getattr(self.py_type, "__dataclass_fields__", {}):
                    return ConstVar(None)
                raise Unsupported(f"attribute {name!r} of {self.py_type.__name__}")
            return tx.output.wrap_const(v)
        return BoundVarMethod(self, name)

    def _mut(self, tx):
        if getattr(self, "read_only", None):
            raise Unsupported(self.read_only)
        note_mutation(tx, self, "dict")
        tx.output.side_effects.mutate(self)
        self.mutated = True

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            if (
                dataclasses.is_dataclass(self.py_type)  # ModelOutput: out[0] is its first value
                and args[0].is_const()
                and isinstance(args[0].const(), int)
            ):
                return list(self.items.values())[args[0].const()]
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstVar(len(self.items))
        if name == "__contains__":
            return ConstVar(self._key(tx, args[0]) in self.items)
        if name == "__iter__" and not args:
            return self.get_iter(tx)
        if name == "__reversed__" and not args:
            return ListIteratorVar(list(reversed(self.unpack(tx))))
        if name == "get":
            k = self._key(tx, args[0])
            return self.items.get(k, args[1] if len(args) > 1 else ConstVar(None))
        if name in ("keys", "values", "items") and not args and not kwargs:
            from .dict_views import DictViewVar

            return DictViewVar(self, name)
        if name == "copy":
            return DictVar(self.items, py_type=dict if self.py_type is dict else self.py_type)
        if name == "__setitem__":
            k = self._key(tx, args[0])
            self._mut(tx)
            self.items[k] = args[1]
            return ConstVar(None)
        if name == "__delitem__":
            k = self._key(tx, args[0])
            if k not in self.items:
                raise Unsupported(f"KeyError {k!r} from del")
            self._mut(tx)
            del self.items[k]
            return ConstVar(None)
        if name == "pop":
            k = self._key(tx, args[0])
            if k in self.items:
                self._mut(tx)
                return self.items.pop(k)
            if len(args) > 1:
                return args[1]
            raise Unsupported("KeyError from dict.pop")
        if name == "popitem" and not args:
            if not self.items:
                raise Unsupported("KeyError from popitem() of an empty dict")
            last = kwargs.get("last", ConstVar(True))
            if self.py_type is dict and kwargs:
                raise Unsupported("dict.popitem keywords")
            self._mut(tx)
            k = next(iter(self.items)) if not last.truth(tx) else next(reversed(self.items))
            from .dict_views import key_var

            return TupleVar([key_var(tx.output, k), self.items.pop(k)])
        if name == "setdefault":
            k = self._key(tx, args[0])
            if k not in self.items:
                self._mut(tx)
                self.items[k] = args[1] if len(args) > 1 else ConstVar(None)
            return self.items[k]
        if name == "update":
            new = {}
            if args:
                other = args[0]
                if isinstance(other, DictVar):
                    new.update(other.items)
                else:
                    for pair in other.unpack(tx):
                        k, v = pair.unpack(tx)
                        new[self._key(tx, k)] = v
            new.update(kwargs)
            self._mut(tx)
            self.items.update(new)
            return ConstVar(None)
        if name == "clear":
            self._mut(tx)
            self.items.clear()
            return ConstVar(None)
        if name == "move_to_end" and issubclass(self.py_type, collections.OrderedDict):
            k = self._key(tx, args[0])
            last = (args[1] if len(args) > 1 else kwargs.get("last", ConstVar(True))).truth(tx)
            if k not in self.items:
                raise Unsupported("KeyError from move_to_end")
            self._mut(tx)
            v = self.items.pop(k)
            if last:
                self.items[k] = v
            else:
                self.items = {k: v, **self.items}
            return ConstVar(None)
        if name == "to_tuple":  # transformers ModelOutput
            return TupleVar(
                [v for v in self.items.values() if not (v.is_const() and v.const() is None)]
            )
        raise Unsupported(f"dict.{name}")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)  # the same dict; mutations are replayed onto it
        parts = {k: cg.rebuild(v) for k, v in self.items.items()}
        t = self.py_type
        if t is dict:
            return lambda ctx: {k: p(ctx) for k, p in parts.items()}
        if t is collections.OrderedDict:
            return lambda ctx: collections.OrderedDict((k, p(ctx)) for k, p in parts.items())
        return lambda ctx: t(**{k: p(ctx) for k, p in parts.items()})

    def __repr__(self):
        return f"Dict({self.items!r})"


class ListIteratorVar(Var):
    """An iterator over known items. With a source it is a real ``list_iterator`` /
    ``tuple_iterator`` from the frame state (``base_index`` = its position when wrapped); what
    the trace consumes is replayed with ``__setstate__``."""

    def __init__(self, items, index=0, source=None, base_index=0):
        self.items = list(items)
        self.index = index
        self.source = source
        self.base_index = base_index

    def python_type(self):
        return type(iter([]))

    def next(self, tx):
        if self.index >= len(self.items):
            return None
        tx.output.side_effects.mutate(self)
        v = self.items[self.index]
        self.index += 1
        return v

    def unpack(self, tx):
        rest = self.items[self.index :]
        self.index = len(self.items)
        return rest

    def get_iter(self, tx):
        return self

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)  # the real iterator, advanced by the replay
        parts = [cg.rebuild(i) for i in self.items[self.index :]]
        return lambda ctx: iter([p(ctx) for p in parts])


class ListLiveIterVar(ListIteratorVar):
    """``iter(lst)``: like CPython's list iterator, reads the list at its index at each step,
    so items appended while iterating are seen (``for node in queue: queue.append(...)``).
    Rebuilt as a real iterator of the rebuilt list at the same index. With a source it is a
    list iterator from the frame state (``base_index`` 0, ``index`` absolute)."""

    def __init__(self, list_var, index=0, source=None):
        self.list_var = list_var
        self.index = index
        self.source = source
        self.base_index = 0
        self.exhausted = False

    @property
    def items(self):
        return self.list_var.items

    def next(self, tx):
        if self.exhausted:
            return None
        tx.output.side_effects.mutate(self)
        items = self.list_var.items
        if self.index >= len(items):
            self.exhausted = True  # CPython drops the list: later appends are not seen
            return None
        self.index += 1
        return items[self.index - 1]

    def unpack(self, tx):
        out = []
        while (v := self.next(tx)) is not None:
            out.append(v)
        return out

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        if self.exhausted:
            return lambda ctx: iter([])
        lst, n = cg.rebuild(self.list_var), self.index

        def real(ctx):
            it = iter(lst(ctx))
            it.__setstate__(n)
            return it

        return real

    def __repr__(self):
        return f"iter({self.list_var!r} at {self.index})"


def wrap_const_container(v):
    """Constant tuples/frozensets become ConstVars; anything else is left to the builder."""
    if is_const_value(v):
        return ConstVar(v)
    return None


# Sets live in sets.py (they keep the recipe of their hash-table order); re-exported here.
from .sets import SetVar  # noqa: E402

__all__ = ["SetVar"]
