"""Making objects of user classes inside the traced code: ``Cls(*args)`` as ``type.__call__``
does it: ``Cls.__new__(Cls, *args)`` (``object.__new__`` unless the class defines its own,
which is inlined), then ``__init__`` when the result is an instance of ``Cls``.

Classes with a metaclass construct the same way unless the metaclass defines ``__call__``
(inlined; its ``super().__call__`` is the construction above); ``super().__new__(cls)`` and ``object.__new__(cls)``
inside a custom ``__new__`` make the new object.
"""

from __future__ import annotations

import inspect
import types

from ..exc import Unsupported
from .base import Var


def new_object(tx, cls):
    """``object.__new__(cls)``: a fresh object that lives in the trace."""
    from .objects import ObjectVar

    if not isinstance(cls, type) or cls.__module__ == "builtins":
        raise Unsupported(f"object.__new__({cls!r})")
    obj = ObjectVar(cls)
    tx.output.side_effects.new_object(obj)
    return obj


def construct_object(tx, class_var, args, kwargs):
    from .functions import UserFunctionVar

    cls = class_var.cls
    meta = type(cls)
    if meta.__call__ is not type.__call__:
        call = inspect.getattr_static(meta, "__call__")
        if not isinstance(call, types.FunctionType):
            raise Unsupported(f"constructing {cls.__name__} (metaclass __call__ in C)")
        # the metaclass's __call__, inlined; its super().__call__ reaches type_call below
        return UserFunctionVar(call).call(tx, [class_var, *args], kwargs)
    return type_call(tx, class_var, args, kwargs)


def type_call(tx, class_var, args, kwargs):
    """``type.__call__(cls, *args, **kwargs)``: ``__new__`` then ``__init__``."""
    from .functions import UserFunctionVar
    from .objects import ObjectVar, _class_attr

    cls = class_var.cls
    new = _class_attr(cls, "__new__")
    if new is object.__new__:
        obj = new_object(tx, cls)
    elif isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType):
        obj = UserFunctionVar(new.__func__).call(tx, [class_var, *args], kwargs)
        if not (isinstance(obj, ObjectVar) and issubclass(obj.cls, cls)):
            return obj  # not an instance: __init__ is not called
    else:
        raise Unsupported(f"constructing {cls.__name__} (__new__ is not a Python function)")
    init = _class_attr(obj.cls, "__init__")
    if init is object.__init__:
        if (args or kwargs) and new is object.__new__:
            raise Unsupported(f"TypeError: {cls.__name__}() takes no arguments")
        return obj
    if not isinstance(init, types.FunctionType):
        raise Unsupported(f"{cls.__name__}.__init__ is not a Python function")
    UserFunctionVar(init).call(tx, [obj, *args], kwargs)
    return obj


class ObjectNewVar(Var):
    """``object.__new__`` reached as ``super().__new__`` or ``object.__new__``."""

    def call(self, tx, args, kwargs):
        from .objects import ClassVar

        if not args or not isinstance(args[0], ClassVar):
            raise Unsupported("object.__new__ without a class")
        return new_object(tx, args[0].cls)


class TypeCallVar(Var):
    """``type.__call__`` bound to a class (``super().__call__`` in a metaclass)."""

    def __init__(self, class_var):
        self.class_var = class_var

    def call(self, tx, args, kwargs):
        return type_call(tx, self.class_var, args, kwargs)
