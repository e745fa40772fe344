"""Python's operator protocol on user objects: binary, in-place, comparison and unary
operators, truth and ``in``, followed the way the interpreter does it.

Binary ``a op b``: when ``type(b)`` is a proper subclass of ``type(a)`` that overrides the
reflected method, ``b.__rop__(a)`` is tried first; then ``a.__op__(b)``; then (for another
type) ``b.__rop__(a)``; ``NotImplemented`` from one moves on to the next, and when none
answers it is a ``TypeError`` (a graph break: eager raises it). In-place ``a op= b`` tries
``a.__iop__(b)`` and falls back to the binary form. Comparisons try the reflected method
(``<`` against ``>``, ``==`` against ``==``) the same way, for the same type too, and ``==``
/ ``!=`` fall back to identity. ``object``'s own ``__eq__``/``__ne__`` are followed (``__ne__``
inverts ``__eq__``). Operands that are not user objects (constants, tensors, containers)
answer ``NotImplemented`` to a user object, as their types do in eager.
"""

from __future__ import annotations

import operator
import types

from ..exc import Unsupported
from .base import ConstVar, Var

_BINARY_NAMES = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "truediv",
    operator.floordiv: "floordiv",
    operator.mod: "mod",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.and_: "and",
    operator.or_: "or",
    operator.xor: "xor",
    operator.lshift: "lshift",
    operator.rshift: "rshift",
}
_INPLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}
# comparison -> (method, reflected method)
_COMPARE = {
    operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
}
_SYMBOL = {
    operator.eq: "==",
    operator.ne: "!=",
    operator.lt: "<",
    operator.le: "<=",
    operator.gt: ">",
    operator.ge: ">=",
}
_UNARY = {
    operator.neg: "__neg__",
    operator.pos: "__pos__",
    operator.invert: "__invert__",
    operator.abs: "__abs__",
    abs: "__abs__",
}
# A tensor meets a user object defining one of these: torch may convert the object (a number,
# an array) or hand the call to it (``__torch_function__``): not followed.
_TENSOR_CONVERSIONS = (
    "__torch_function__",
    "__index__",
    "__int__",
    "__float__",
    "__complex__",
    "__array__",
)
_NO_METHOD = object()


def handles(op) -> bool:
    return op in _BINARY_NAMES or op in _INPLACE or op in _COMPARE


def _is_user(v) -> bool:
    from .objects import ObjectVar

    return isinstance(v, ObjectVar)


def _type_of(v):
    if _is_user(v):
        return v.cls
    from .builtins import python_type_of

    return python_type_of(v)


def _lookup(cls, name):
    """The special method ``name`` as the interpreter finds it (on the type, MRO order)."""
    from .objects import _MISSING, _class_attr

    attr = _class_attr(cls, name)
    return _NO_METHOD if attr is _MISSING else attr


def _is_not_implemented(r: Var) -> bool:
    return r.is_const() and r.const() is NotImplemented


def _check_operands(a, b):
    from .tensor import TensorVar

    for u, other in ((a, b), (b, a)):
        if _is_user(u) and isinstance(other, TensorVar):
            for name in _TENSOR_CONVERSIONS:
                if _lookup(u.cls, name) is not _NO_METHOD:
                    raise Unsupported(f"a tensor and a {u.cls.__name__} object defining {name}")


def _call_special(tx, self_var, name, other):
    """``type(self).name(self, other)`` -> Var, or ``NotImplemented`` as a ConstVar."""
    if not _is_user(self_var):
        # constants, tensors, containers, functions: their types answer NotImplemented to
        # an object of a plain Python class
        return ConstVar(NotImplemented)
    cls = self_var.cls
    attr = _lookup(cls, name)
    if attr is _NO_METHOD:
        return ConstVar(NotImplemented)
    if attr is object.__eq__:
        from .builtins import identity

        same = identity(self_var, other)
        if same is None:
            raise Unsupported(f"cannot decide identity in {cls.__name__}.__eq__")
        return ConstVar(True) if same else ConstVar(NotImplemented)
    if attr is object.__ne__:
        r = _call_special(tx, self_var, "__eq__", other)
        if _is_not_implemented(r):
            return r
        return ConstVar(not r.truth(tx))
    if attr in (object.__lt__, object.__le__, object.__gt__, object.__ge__):
        return ConstVar(NotImplemented)
    if attr is None:  # ``__eq__ = None``: the call raises TypeError
        raise Unsupported(f"TypeError: {cls.__name__}.{name} is None")
    if not isinstance(attr, types.FunctionType):
        raise Unsupported(f"{cls.__name__}.{name} is not a Python function ({type(attr).__name__})")
    from ..source import Source
    from .functions import UserFunctionVar

    src = None
    if self_var.source is not None:
        src = Source(f"inspect.getattr_static(type({self_var.source.expr}), {name!r})")
    return UserFunctionVar(attr, src).call(tx, [self_var, other], {})


def _overrides(sub, base, name) -> bool:
    return _lookup(sub, name) is not _NO_METHOD and _lookup(sub, name) is not _lookup(base, name)


def user_binary(tx, op, a: Var, b: Var) -> Var:
    """``op`` (binary, in-place or comparison) where ``a`` or ``b`` is a user object."""
    _check_operands(a, b)
    if op in _INPLACE:
        if _is_user(a):
            iname = f"__i{_BINARY_NAMES[_INPLACE[op]]}__"
            if _lookup(a.cls, iname) is not _NO_METHOD:
                r = _call_special(tx, a, iname, b)
                if not _is_not_implemented(r):
                    return r
        return _binary(tx, _INPLACE[op], a, b)
    if op in _COMPARE:
        return _compare(tx, op, a, b)
    if op in _BINARY_NAMES:
        return _binary(tx, op, a, b)
    raise Unsupported(f"{op.__name__} on user objects")


def _binary(tx, op, a, b):
    base = _BINARY_NAMES[op]
    name, rname = f"__{base}__", f"__r{base}__"
    ta, tb = _type_of(a), _type_of(b)
    reflected_done = ta is tb  # the same type: only the left operand's method
    if not reflected_done and issubclass(tb, ta) and _overrides(tb, ta, rname):
        r = _call_special(tx, b, rname, a)
        if not _is_not_implemented(r):
            return r
        reflected_done = True
    r = _call_special(tx, a, name, b)
    if not _is_not_implemented(r):
        return r
    if not reflected_done:
        r = _call_special(tx, b, rname, a)
        if not _is_not_implemented(r):
            return r
    raise Unsupported(
        f"TypeError: unsupported operand types for {op.__name__}: "
        f"{ta.__name__!r} and {tb.__name__!r}"
    )


def _compare(tx, op, a, b):
    name, rname = _COMPARE[op]
    ta, tb = _type_of(a), _type_of(b)
    reflected_done = False
    if ta is not tb and issubclass(tb, ta):
        reflected_done = True
        r = _call_special(tx, b, rname, a)
        if not _is_not_implemented(r):
            return r
    r = _call_special(tx, a, name, b)
    if not _is_not_implemented(r):
        return r
    if not reflected_done:
        r = _call_special(tx, b, rname, a)
        if not _is_not_implemented(r):
            return r
    if op in (operator.eq, operator.ne):
        from .builtins import identity

        same = identity(a, b)
        if same is None:
            raise Unsupported(f"cannot decide identity of {a} and {b}")
        return ConstVar(same if op is operator.eq else not same)
    raise Unsupported(
        f"TypeError: {_SYMBOL[op]!r} not supported between instances of "
        f"{ta.__name__!r} and {tb.__name__!r}"
    )


def user_unary(tx, op, v: Var) -> Var:
    name = _UNARY.get(op)
    if name is None:
        raise Unsupported(f"{getattr(op, '__name__', op)} of a {v.cls.__name__} object")
    attr = _lookup(v.cls, name)
    if attr is _NO_METHOD:
        raise Unsupported(f"TypeError: bad operand type for {name} of {v.cls.__name__!r}")
    return _call_special_unary(tx, v, name, attr)


def _call_special_unary(tx, v, name, attr):
    if not isinstance(attr, types.FunctionType):
        raise Unsupported(f"{v.cls.__name__}.{name} is not a Python function")
    from .functions import UserFunctionVar

    return UserFunctionVar(attr).call(tx, [v], {})


def user_truth(tx, v) -> bool:
    """``bool(obj)``: ``__bool__`` (must give a bool), else ``__len__`` (an int >= 0)."""
    cls = v.cls
    attr = _lookup(cls, "__bool__")
    if attr is not _NO_METHOD:
        if attr is None:
            raise Unsupported(f"TypeError: {cls.__name__}.__bool__ is None")
        r = _call_special_unary(tx, v, "__bool__", attr)
        if not r.is_const():
            raise Unsupported(f"{cls.__name__}.__bool__ depends on tensor data ({r})")
        if type(r.const()) is not bool:
            raise Unsupported(f"TypeError: __bool__ should return bool, returned {r.const()!r}")
        return r.const()
    if _lookup(cls, "__len__") is not _NO_METHOD:
        r = v.call_method(tx, "__len__", [], {})
        if not r.is_const() or not isinstance(r.const(), int):
            raise Unsupported(f"{cls.__name__}.__len__ is not a constant int ({r})")
        n = r.const()
        if n < 0:
            raise Unsupported("ValueError: __len__() should return >= 0")
        return n != 0
    return True


def user_contains(tx, container, item) -> bool:
    """``item in obj``: ``__contains__``, else iteration comparing with ``is`` then ``==``."""
    from .builtins import binary_op, identity

    attr = _lookup(container.cls, "__contains__")
    if attr is not _NO_METHOD:
        if not isinstance(attr, types.FunctionType):
            raise Unsupported(f"{container.cls.__name__}.__contains__ is not a Python function")
        from .functions import UserFunctionVar

        r = UserFunctionVar(attr).call(tx, [container, item], {})
        return r.truth(tx)
    for x in container.unpack(tx):
        if identity(x, item) is True:
            return True
        if binary_op(tx, operator.eq, x, item).truth(tx):
            return True
    return False
