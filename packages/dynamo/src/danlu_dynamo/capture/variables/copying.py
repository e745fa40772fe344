"""``copy.deepcopy`` on symbolic values (a config object copied before it is edited).

Inlining ``copy.py`` itself needs ``id()``-keyed memo dicts, ``object.__reduce_ex__`` and
``__dict__.update`` on fresh objects; instead this follows deepcopy's result for the cases whose
semantics are plain: constants (atomic), tuples/lists/dicts, and instances of ordinary classes
(``object.__reduce_ex__`` path: ``cls.__new__(cls)`` + a deep copy of ``__dict__``).  Anything
else (tensors, modules, custom ``__deepcopy__``/``__reduce__``/``__getstate__``/``__setstate__``,
slots, custom ``__new__`` or metaclass) raises ``Unsupported``: the call breaks the graph and
runs eagerly.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import copy
import copyreg

from ..exc import Unsupported
from .base import Var
from .containers import DictVar, ListVar, TupleVar

_OBJECT_PROTOCOL = {
    "__reduce_ex__": object.__reduce_ex__,
    "__reduce__": object.__reduce__,
    "__getstate__": getattr(object, "__getstate__", None),
}
_MUST_BE_ABSENT = ("__deepcopy__", "__setstate__", "__slots__")


def deepcopy_var(tx, x: Var, memo: Var | None = None) -> Var:
    if memo is not None and not (memo.is_const() and memo.const() is None):
        raise Unsupported("copy.deepcopy with an explicit memo")
    return _Copier(tx).copy(x)


class _Copier:
    def __init__(self, tx):
        self.tx = tx
        self.memo: dict[int, tuple[Var, Var]] = {}  # id(original Var) -> (original, copy)
        self.building: set[int] = set()  # ids of originals whose copy is being filled in

    def copy(self, v: Var) -> Var:
        from .objects import ClassVar, ModuleVar, ObjectVar
        from .tensor import TensorVar

        hit = self.memo.get(id(v))
        if hit is not None:
            if id(v) in self.building:
                # a cycle back into a value still being copied: the graph's output rebuild
                # cannot create self-referencing objects, so leave it to eager
                raise Unsupported("copy.deepcopy of a self-referencing value")
            return hit[1]
        if isinstance(v, ClassVar) or (v.is_const() and not isinstance(v, (TupleVar, ListVar))):
            return v  # immutable constants, classes and functions are atomic for deepcopy
        if isinstance(v, TensorVar):
            raise Unsupported("copy.deepcopy of a tensor")
        if isinstance(v, TupleVar) and v.py_type is tuple:
            return TupleVar([self.copy(i) for i in v.items])
        if isinstance(v, ListVar) and v.py_type is list:
            out = ListVar([])
            with self.filling(v, out):
                out.items = [self.copy(i) for i in v.items]
            return out
        if isinstance(v, DictVar) and v.py_type in (dict, collections.OrderedDict):
            out = DictVar({}, py_type=v.py_type)
            with self.filling(v, out):
                out.items = {k: self.copy(i) for k, i in v.items.items()}
            return out
        if isinstance(v, ObjectVar) and not isinstance(v, ModuleVar):
            return self.copy_object(v)
        from .functions import NestedFunctionVar, UserFunctionVar

        if isinstance(v, UserFunctionVar | NestedFunctionVar):
            return v
        raise Unsupported(f"copy.deepcopy of {v}")

    def copy_object(self, v) -> Var:
        from .objects import _MISSING, ObjectVar, _class_attr

        cls = v.cls
        if type(cls) not in (type, abc.ABCMeta) or cls.__new__ is not object.__new__:
            raise Unsupported(f"copy.deepcopy of {cls.__name__} (custom __new__ or metaclass)")
        if cls in copy._deepcopy_dispatch or cls in copyreg.dispatch_table:
            raise Unsupported(f"copy.deepcopy of {cls.__name__} (registered copier)")
        if issubclass(cls, (list, dict, set, tuple, BaseException)):
            raise Unsupported(f"copy.deepcopy of a {cls.__name__} instance")
        for name, default in _OBJECT_PROTOCOL.items():
            attr = _class_attr(cls, name)
            if attr is not _MISSING and attr is not default:
                raise Unsupported(f"copy.deepcopy of {cls.__name__} (custom {name})")
        for name in _MUST_BE_ABSENT:
            if any(name in k.__dict__ for k in cls.__mro__[:-1]):
                raise Unsupported(f"copy.deepcopy of {cls.__name__} (has {name})")
        state = self.instance_state(v)
        for k in state:
            attr = _class_attr(cls, k)
            if attr is not _MISSING and hasattr(type(attr), "__set__"):
                # deepcopy writes __dict__ directly; our rebuilt object would go through it
                raise Unsupported(f"copy.deepcopy of {cls.__name__} (data descriptor {k!r})")
        out = ObjectVar(cls)
        self.tx.output.side_effects.new_object(out)
        with self.filling(v, out):
            out.pending = {k: self.copy(val) for k, val in state.items()}
        return out

    @contextlib.contextmanager
    def filling(self, original, out):
        self.memo[id(original)] = (original, out)
        self.building.add(id(original))
        try:
            yield
        finally:
            self.building.discard(id(original))

    def instance_state(self, v) -> dict:
        """The instance ``__dict__`` as Vars, in order (guarded on its keys for real objects)."""
        if v.value is None:
            return {k: val for k, val in v.pending.items() if k not in v.deleted}
        if v.source is None:
            raise Unsupported("copy.deepcopy of an object reached without a source")
        d = getattr(v.value, "__dict__", None)
        if type(d) is not dict:
            raise Unsupported(f"copy.deepcopy of {v.cls.__name__} without a plain __dict__")
        dict_src = v.source.attr("__dict__")
        self.tx.output.guards.dict_keys(dict_src.expr, d)
        state = {}
        for k, real in d.items():
            if k in v.deleted:
                continue
            state[k] = (
                v.pending[k] if k in v.pending else self.tx.output.wrap(real, dict_src.item(k))
            )
        for k, val in v.pending.items():
            state.setdefault(k, val)
        return state
