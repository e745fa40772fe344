"""``super()``, ``object``'s own attribute methods reached explicitly, and the ``__dict__``
of objects made in the trace."""

from __future__ import annotations

import types

from ..exc import Unsupported
from .base import ConstVar, Var
from .containers import DictVar
from .functions import BoundMethodVar, UserFunctionVar


class SuperVar(Var):
    def __init__(self, cls, obj: Var):
        self.cls = cls
        self.obj = obj

    def getattr(self, tx, name):
        from .objects import ClassVar, ObjectVar, RealCMethodVar

        obj_type = self.obj.cls if isinstance(self.obj, ObjectVar) else self.obj.python_type()
        if isinstance(self.obj, ClassVar) and isinstance(self.obj.cls, type):
            if issubclass(self.obj.cls, self.cls):  # super() in __new__ or a classmethod
                obj_type = self.obj.cls
        mro = obj_type.__mro__
        try:
            start = mro.index(self.cls) + 1
        except ValueError as e:
            raise Unsupported("super(): class not in MRO") from e
        for klass in mro[start:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    if isinstance(self.obj, ClassVar) and obj_type is self.obj.cls:
                        return UserFunctionVar(attr)  # super(C, cls).f: a plain function
                    return BoundMethodVar(UserFunctionVar(attr), self.obj)
                if isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
                    return UserFunctionVar(attr.__func__)
                if isinstance(attr, classmethod) and isinstance(self.obj, ClassVar):
                    return BoundMethodVar(UserFunctionVar(attr.__func__), self.obj)
                if isinstance(attr, property):
                    return UserFunctionVar(attr.fget).call(tx, [self.obj], {})
                if attr is object.__init__:
                    return _NoOp()
                if attr is type.__call__ and isinstance(self.obj, ClassVar):
                    from .construction import TypeCallVar

                    return TypeCallVar(self.obj)
                if attr is object.__new__:
                    from .construction import ObjectNewVar

                    return ObjectNewVar()
                plain = next((m for k, m in _PLAIN_OBJECT_METHODS if k is attr), None)
                if plain is not None and isinstance(self.obj, ObjectVar) and self.obj.value is None:
                    return _PlainAttrVar(self.obj, plain)
                if (
                    isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType))
                    and getattr(self.obj, "value", None) is not None
                ):
                    return RealCMethodVar(self.obj, attr, name)
                raise Unsupported(f"super().{name} is {type(attr).__name__}")
        raise Unsupported(f"super() has no attribute {name}")


_PLAIN_OBJECT_METHODS = (
    (object.__getattribute__, "generic_getattr"),
    (object.__setattr__, "generic_setattr"),
    (object.__delattr__, "generic_delattr"),
)


class _PlainAttrVar(Var):
    """``super().__getattribute__`` & co. reaching ``object``'s, on an object made in the trace."""

    def __init__(self, obj, method):
        self.obj = obj
        self.method = method

    def call(self, tx, args, kwargs):
        if kwargs or not args or not args[0].is_const() or not isinstance(args[0].const(), str):
            raise Unsupported(f"object.{self.method} with these arguments")
        r = getattr(self.obj, self.method)(tx, args[0].const(), *args[1:])
        return ConstVar(None) if r is None else r


class _PlainAttrFn(Var):
    """``object.__setattr__`` & co. called explicitly: ``(obj, name, *value)``."""

    def __init__(self, method):
        self.method = method

    def call(self, tx, args, kwargs):
        from .objects import ObjectVar

        if not args or not isinstance(args[0], ObjectVar) or args[0].value is not None:
            raise Unsupported(f"object.{self.method} on this value")
        return _PlainAttrVar(args[0], self.method).call(tx, args[1:], kwargs)


def _instance_dict(obj):
    """``obj.__dict__`` of an object made in the trace: a dict sharing its attribute table."""
    d = getattr(obj, "_dict_var", None)  # one Var: `o.__dict__ is o.__dict__` holds
    if d is None:
        d = obj._dict_var = _InstanceDictVar(obj)
    return d


class _InstanceDictVar(DictVar):
    """The ``__dict__`` of an object made in the trace: its items are the object's attribute
    table; rebuilt after the graph as the rebuilt object's own ``__dict__`` (not a copy)."""

    def __init__(self, obj):
        super().__init__({})
        self.items = obj.pending
        self.obj = obj

    def reconstruct(self, cg):
        o = cg.rebuild(self.obj)
        return lambda ctx: o(ctx).__dict__


class _NoOp(Var):
    def call(self, tx, args, kwargs):
        return ConstVar(None)
