"""Dict keys, dict views and dict iterators.

A dict's keys are real hashable objects (constants, enum members, classes, functions, modules,
tuples of those); ``dict_key`` turns a symbolic value into one, ``key_var`` a key back into a
symbolic value. ``d.keys()``/``d.values()``/``d.items()`` are *views* (``DictViewVar``): they
hold the dict's symbolic value, not a copy of its items, so every read (``in``, ``len``,
iteration, comparisons, set operations) sees the dict as it is at that point of the trace,
mutations made after the view was taken included. Rebuilt after the graph, a view is the
rebuilt dict's own view. Iterating a dict or a view checks, at every step, that the dict has
not changed size (eager raises ``RuntimeError`` then, and so does the rebuilt iterator).
"""

from __future__ import annotations

import collections
import enum
import operator
import types

import torch

from ..exc import Unsupported
from .base import ConstVar, Var, is_const_value
from .containers import DictVar, ListIteratorVar, SeqVar, SetVar

_KINDS = ("keys", "values", "items")
_VIEW_TYPES = {k: type(getattr({}, k)()) for k in _KINDS}
_ODICT_VIEW_TYPES = {k: type(getattr(collections.OrderedDict(), k)()) for k in _KINDS}


def _identity_hashed(v) -> bool:
    t = type(v)
    return t.__hash__ is object.__hash__ and t.__eq__ is object.__eq__


def dict_key(tx, v: Var):
    """The real key a symbolic value stands for, or ``Unsupported``."""
    from .builtins import BuiltinVar, TorchFnVar
    from .functions import UserFunctionVar
    from .objects import ClassVar, ModuleVar, ObjectVar, PythonModuleVar
    from .symbolic import SymNumVar
    from .tensor import TensorVar

    if isinstance(v, TensorVar):
        raise Unsupported("a tensor as a dict key")
    if isinstance(v, SymNumVar):
        k = v.const()  # a size as a key: specialised (guarded)
    elif isinstance(v, ConstVar | ClassVar | BuiltinVar | TorchFnVar):
        k = v.const()
    elif isinstance(v, SeqVar) and v.py_type is tuple:
        return tuple(dict_key(tx, i) for i in v.items)
    elif isinstance(v, UserFunctionVar):
        k = v.exact()  # the key is this object: guarded by identity
    elif isinstance(v, PythonModuleVar):
        k = v.mod
    elif isinstance(v, ObjectVar) and v.value is not None and not v.pending:
        k = v.value
        if not _identity_hashed(k) and not isinstance(v, ModuleVar):
            raise Unsupported(f"dict key of type {type(k).__name__} with its own __hash__/__eq__")
        if v.source is not None and not isinstance(v, ModuleVar):
            tx.output.guards.id_match(v.source.expr, k)  # the rebuilt dict holds this object
    else:
        raise Unsupported(f"dict key {v}")
    try:
        hash(k)
    except TypeError as e:
        raise Unsupported(f"unhashable dict key {type(k).__name__}") from e
    return k


def is_plain_key(k) -> bool:
    """A key whose ``repr`` reads it back (usable in a source ``d[key]``)."""
    return is_const_value(k) and type(k) is not float and not isinstance(k, types.CodeType)


def wrappable_key(k) -> bool:
    """A key of a dict from the frame state that guards can follow (equal by value or by
    identity, and its type guarded): constants, enum members, classes, functions, modules."""
    if isinstance(k, tuple) and type(k) is tuple:
        return all(wrappable_key(x) for x in k)
    if is_const_value(k) or isinstance(k, enum.Enum):
        return True
    if isinstance(k, type | types.FunctionType | types.BuiltinFunctionType | types.ModuleType):
        return True
    return isinstance(k, torch.nn.Module) and _identity_hashed(k)


def key_var(out, k) -> Var:
    """``out``: the OutputGraph (a key that is not a constant is wrapped as the object)."""
    if is_const_value(k):
        return ConstVar(k)
    return out.wrap(k, None)


class DictViewVar(Var):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: reads go to the dict as it is now."""

    def __init__(self, dict_var: DictVar, kind: str):
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self):
        if issubclass(self.dict_var.py_type, collections.OrderedDict):
            return _ODICT_VIEW_TYPES[self.kind]
        return _VIEW_TYPES[self.kind]

    def truth(self, tx):
        return len(self.dict_var.items) > 0

    def unpack(self, tx):
        return view_items(tx.output, self.dict_var, self.kind)

    def get_iter(self, tx):
        return DictIterVar(tx, self.dict_var, self.kind)

    def getattr(self, tx, name):
        from .functions import BoundVarMethod

        if name == "mapping":
            raise Unsupported("dict view .mapping")
        return BoundVarMethod(self, name)

    def call_method(self, tx, name, args, kwargs):
        from .builtins import compare_eq

        d = self.dict_var
        if name == "__len__" and not args:
            return ConstVar(len(d.items))
        if name == "__iter__" and not args:
            return self.get_iter(tx)
        if name == "__reversed__" and not args:
            return ListIteratorVar(list(reversed(self.unpack(tx))))
        if name == "__contains__" and len(args) == 1:
            item = args[0]
            if self.kind == "keys":
                return ConstVar(dict_key(tx, item) in d.items)
            if self.kind == "values":
                return ConstVar(any(compare_eq(tx, v, item) for v in d.items.values()))
            if not isinstance(item, SeqVar) and not (
                item.is_const() and isinstance(item.const(), tuple)
            ):
                return ConstVar(False)
            pair = item.unpack(tx)
            if len(pair) != 2:
                return ConstVar(False)
            k = dict_key(tx, pair[0])
            return ConstVar(k in d.items and compare_eq(tx, d.items[k], pair[1]))
        if name == "isdisjoint" and len(args) == 1 and self.kind != "values":
            return set_like_op(tx, lambda a, b: a.isdisjoint(b), self, args[0])
        raise Unsupported(f"{self.python_type().__name__}.{name}")

    def reconstruct(self, cg):
        d = cg.rebuild(self.dict_var)
        kind = self.kind
        return lambda ctx: getattr(d(ctx), kind)()

    def __repr__(self):
        return f"DictView({self.kind}, {self.dict_var!r})"


def view_items(out, dict_var: DictVar, kind: str) -> list:
    return [view_item(out, dict_var, kind, k) for k in dict_var.items]


def view_item(out, dict_var: DictVar, kind: str, k) -> Var:
    from .containers import TupleVar

    if kind == "keys":
        return key_var(out, k)
    if kind == "values":
        return dict_var.items[k]
    return TupleVar([key_var(out, k), dict_var.items[k]])


_RESIZED = "dictionary changed size during iteration"


class _RaisingIterator:
    """A dict iterator whose dict changed size: its next step raises as eager's does."""

    def __init__(self, message):
        self.message = message

    def __iter__(self):
        return self

    def __next__(self):
        raise RuntimeError(self.message)


class DictIterVar(ListIteratorVar):
    """``iter(d)`` / ``iter(d.keys())`` / ... : the keys are fixed when it is made (a dict that
    changes size fails its next step), the values are read from the dict at each step."""

    def __init__(self, tx, dict_var: DictVar, kind: str):
        self.dict_var = dict_var
        self.kind = kind
        self.keys0 = list(dict_var.items)
        self.index = 0
        self.source = None
        self.base_index = 0
        self._out = tx.output
        if not hasattr(dict_var, "iterators"):
            dict_var.iterators = []
        dict_var.iterators.append(self)

    def _rest(self) -> list:
        return [view_item(self._out, self.dict_var, self.kind, k) for k in self.keys0[self.index :]]

    def _resized(self) -> bool:
        return len(self.dict_var.items) != len(self.keys0)

    def _check(self):
        d = self.dict_var.items
        if self._resized():  # eager raises at this step; the rebuilt iterator does too
            raise Unsupported(_RESIZED)
        if list(d) != self.keys0:
            raise Unsupported("dictionary keys changed during iteration")

    def next(self, tx):
        self._check()
        if self.index >= len(self.keys0):
            return None
        tx.output.side_effects.mutate(self)
        v = view_item(self._out, self.dict_var, self.kind, self.keys0[self.index])
        self.index += 1
        return v

    def unpack(self, tx):
        self._check()
        rest = self._rest()
        self.index = len(self.keys0)
        return rest

    def reconstruct(self, cg):
        if self._resized():
            return lambda ctx: _RaisingIterator(_RESIZED)
        if list(self.dict_var.items) != self.keys0:
            raise Unsupported("cannot rebuild a dict iterator whose dict's keys changed")
        # A real iterator of the rebuilt dict at the same position: code that continues the
        # loop in plain Python and changes the dict's size gets eager's RuntimeError.
        d = cg.rebuild(self.dict_var)
        kind, n = self.kind, self.index

        def real(ctx):
            it = iter(getattr(d(ctx), kind)())
            for _ in range(n):
                next(it)
            return it

        return real

    def __repr__(self):
        return f"DictIter({self.kind}, {self.index}/{len(self.keys0)})"


# ------------------------------------------------------------------ set-like operations

_SET_OPS = {operator.and_, operator.or_, operator.sub, operator.xor}
_IN_PLACE = {
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.isub: operator.sub,
    operator.ixor: operator.xor,
}
_COMPARE_OPS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}


def _real(tx, v: Var):
    """A real Python object that behaves as ``v`` does in a set operation or comparison."""
    if isinstance(v, DictViewVar):
        d = v.dict_var.items
        if v.kind == "keys":
            return dict.fromkeys(d).keys()
        if v.kind == "items":
            return {k: _item_value(x) for k, x in d.items()}.items()
        raise Unsupported("set operation on dict values")
    if isinstance(v, SetVar):
        return v.real
    if isinstance(v, DictVar):
        return dict.fromkeys(v.items)
    if isinstance(v, SeqVar):
        vals = [dict_key(tx, i) if not i.is_const() else i.const() for i in v.items]
        return tuple(vals) if v.py_type is tuple else vals
    if v.is_const():
        return v.const()
    raise Unsupported(f"set operation with {v}")


class _NeedsData(Exception):
    pass


class _TensorStandIn:
    """A tensor value in a set operation on dict items: hashed by identity as a tensor is;
    comparing it with anything else depends on data (the trace stops)."""

    __slots__ = ()

    def __eq__(self, other):
        if other is self:
            return True
        raise _NeedsData()

    __hash__ = object.__hash__


def _item_value(x: Var):
    from .tensor import TensorVar

    if x.is_const():
        return x.const()
    if isinstance(x, TensorVar):
        return _TensorStandIn()
    raise Unsupported(f"set operation on dict items holding {x}")


def _recipe(v: Var, real):
    """A function ``env -> real`` making the operand again at run time (see sets.py)."""
    if isinstance(v, SetVar):
        return v.recipe, v.deps
    return (lambda env: real), set()  # views, dicts, sequences, constants: not mutated


def set_like_op(tx, op, a: Var, b: Var) -> Var:
    ra, rb = _real(tx, a), _real(tx, b)
    try:
        r = op(ra, rb)
    except _NeedsData as e:
        raise Unsupported("dict items compared by tensor values (depends on data)") from e
    except Exception as e:
        raise Unsupported(f"{type(e).__name__} in a set operation") from e
    if isinstance(r, bool):
        return ConstVar(r)
    if isinstance(r, set):
        if any(isinstance(x, tuple) and any(isinstance(i, _TensorStandIn) for i in x) for x in r):
            raise Unsupported("a set of dict items holding tensors")
        if not all(is_const_value(x) for x in r):
            raise Unsupported("a set of keys that are not constants")
        (fa, da), (fb, db) = _recipe(a, ra), _recipe(b, rb)
        return SetVar.made_by(r, lambda env: op(fa(env), fb(env)), da | db)
    raise Unsupported(f"set operation result {type(r).__name__}")


def view_binary(tx, op, a: Var, b: Var):
    """A binary operator with a dict view or a set on one side; None when not one of those."""
    views = (DictViewVar, SetVar)
    if not (isinstance(a, views) or isinstance(b, views)):
        return None
    if op in _IN_PLACE and isinstance(a, SetVar):
        return _set_inplace(tx, _IN_PLACE[op], a, b)
    op = _IN_PLACE.get(op, op)  # a view has no in-place operators: ``k |= s`` is ``k = k | s``
    if op not in _SET_OPS and op not in _COMPARE_OPS:
        return None
    if op in (operator.eq, operator.ne):
        for v in (a, b):
            if isinstance(v, DictViewVar) and v.kind == "values":
                # no __eq__: equal only to itself
                same = a is b
                return ConstVar(same if op is operator.eq else not same)
    return set_like_op(tx, op, a, b)


def _set_inplace(tx, op, a: SetVar, b: Var) -> Var:
    """``s |= t`` & co. change ``s`` itself."""
    if not isinstance(b, DictViewVar | SetVar) and not (
        b.is_const() and isinstance(b.const(), frozenset | set)
    ):
        raise Unsupported("in-place set operation with a non-set")
    inplace = {
        operator.or_: operator.ior,
        operator.and_: operator.iand,
        operator.sub: operator.isub,
        operator.xor: operator.ixor,
    }[op]
    rb = _real(tx, b)
    fb, db = _recipe(b, rb)
    try:
        return a.inplace(tx, inplace, rb, fb, db)
    except TypeError as e:
        raise Unsupported(f"TypeError in an in-place set operation: {e}") from e


DICT_ITER_TYPES = tuple(type(iter(getattr({}, k)())) for k in _KINDS) + tuple(
    type(reversed(getattr({}, k)())) for k in _KINDS
)
