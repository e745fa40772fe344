"""Python builtins, operators on symbolic values, and torch-level callables."""

from __future__ import annotations

import builtins
import functools
import math
import operator

from ..exc import Unsupported
from .base import FOLDABLE, ConstVar, NullVar, Var
from .containers import DictVar, ListIteratorVar, ListVar, SeqVar, SetVar, TupleVar
from .dict_views import DictViewVar, dict_key, view_binary
from .lazy_iter import any_shared, lazy_enumerate, lazy_filter, lazy_map, lazy_zip
from .numpy_arrays import NDArrayVar, array_binary, array_unary
from .symbolic import SymNumVar, sym_binary
from .tensor import TensorVar

BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
INPLACE = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "@=": operator.imatmul,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
INPLACE_TO_BINARY = {v: BINARY[k[:-1]] for k, v in INPLACE.items()}


def binary_op(tx, op, a: Var, b: Var) -> Var:
    """``op`` is an ``operator`` function (binary, in-place or comparison)."""
    if isinstance(a, NDArrayVar) or isinstance(b, NDArrayVar):
        return array_binary(tx, op, a, b)
    from .objects import ObjectVar

    if isinstance(a, ObjectVar) or isinstance(b, ObjectVar):
        from .user_operators import handles, user_binary

        if handles(op):
            return user_binary(tx, op, a, b)
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        if op in INPLACE_TO_BINARY:
            if isinstance(a, TensorVar):
                return tx.output.call_op("call_function", op, [a, b], {}, ret_self=True)
            op = INPLACE_TO_BINARY[op]
        for v in (a, b):
            if not (isinstance(v, TensorVar) or v.is_const() or isinstance(v, SeqVar)):
                raise Unsupported(f"{op.__name__} between a tensor and {v}")
        return tx.output.call_op("call_function", op, [a, b], {})
    r = view_binary(tx, op, a, b)  # dict views and sets: set operations, comparisons
    if r is not None:
        return r
    if isinstance(a, SymNumVar) or isinstance(b, SymNumVar):
        r = sym_binary(tx, op, a, b)  # size arithmetic in the graph (dynamic shapes)
        if r is not None:
            return r
    if _sym_items(a) or _sym_items(b):
        pass  # the sequence rules below keep symbolic sizes (``shape[:-1] + (n,)``)
    elif a.is_const() and b.is_const():
        try:
            return tx.output.wrap_const(op(a.const(), b.const()))
        except Exception as e:
            raise Unsupported(f"{type(e).__name__} in {op.__name__} on constants") from e
    if op in (operator.eq, operator.ne) and not isinstance(a, SeqVar | DictVar):
        same = identity(a, b)
        if same is not None:
            return ConstVar(same if op is operator.eq else not same)
    if _is_deque(a) or _is_deque(b):
        if op not in (operator.eq, operator.ne) or not isinstance(a, SeqVar | ConstVar):
            raise Unsupported(f"{op.__name__} with a deque")
    if isinstance(a, SeqVar) and isinstance(b, SeqVar):
        if op in (operator.add, operator.iadd):
            if op is operator.iadd and isinstance(a, ListVar):
                return a.call_method(tx, "__iadd__", [b], {})
            return type(a)(
                a.items + b.items, py_type=a.py_type if a.py_type in (tuple, list) else tuple
            )
        if op in (operator.eq, operator.ne):
            eq = (
                _seq_eq_types(a, b)
                and len(a.items) == len(b.items)
                and all(compare_eq(tx, x, y) for x, y in zip(a.items, b.items))
            )
            return ConstVar(eq if op is operator.eq else not eq)
    if isinstance(a, SeqVar) and b.is_const() and op in (operator.mul, operator.imul):
        return type(a)(
            a.items * b.const(), py_type=a.py_type if a.py_type in (tuple, list) else tuple
        )
    if (
        isinstance(a, SeqVar)
        and b.is_const()
        and op in (operator.add, operator.iadd, operator.eq, operator.ne)
    ):
        return binary_op(tx, op, a, tx.output.wrap_const(b.const()) if False else _seq_of(b))
    if (
        isinstance(b, SeqVar)
        and isinstance(a, ConstVar)
        and isinstance(a.value, (tuple, list))
        and op in (operator.add, operator.eq, operator.ne)
    ):
        return binary_op(tx, op, _seq_of(a), b)  # (-1,) + shape[1:] with symbolic sizes
    if isinstance(a, DictVar) and isinstance(b, DictVar) and not _counter(a, b):
        if op is operator.or_:
            return DictVar({**a.items, **b.items})
        if op is operator.ior:
            a.call_method(tx, "update", [b], {})
            return a
        if op in (operator.eq, operator.ne):
            eq = a.items.keys() == b.items.keys() and all(
                compare_eq(tx, v, b.items[k]) for k, v in a.items.items()
            )
            return ConstVar(eq if op is operator.eq else not eq)
    raise Unsupported(f"{op.__name__}({a}, {b})")


def _is_deque(v) -> bool:
    import collections

    return isinstance(v, SeqVar) and v.py_type is collections.deque


def _counter(*vs) -> bool:
    import collections

    return any(issubclass(v.py_type, collections.Counter) for v in vs)


def _seq_eq_types(a, b) -> bool:
    """Sequences that can compare equal: tuples (namedtuples, sizes) with tuples, a list
    with a list, a deque with a deque."""
    ta, tb = a.py_type, b.py_type
    if issubclass(ta, tuple) and issubclass(tb, tuple):
        return True
    return ta is tb


def _sym_items(v: Var) -> bool:
    return isinstance(v, SeqVar) and any(isinstance(i, SymNumVar) for i in v.items)


def _seq_of(c: Var):
    v = c.const()
    if isinstance(v, tuple):
        return TupleVar([ConstVar(x) for x in v])
    if isinstance(v, list):
        return ListVar([ConstVar(x) for x in v])
    raise Unsupported("sequence op with a non-sequence")


def identity(a: Var, b: Var):
    """``a is b`` when it can be decided from the trace, else None."""
    if a is b:
        return True
    if isinstance(a, NullVar) or isinstance(b, NullVar):
        return False
    fa, fb = getattr(a, "fn", None), getattr(b, "fn", None)
    if fa is not None and fb is not None and type(a) is type(b) and not hasattr(a, "args"):
        for v in (a, b):
            if hasattr(v, "exact"):
                v.exact()
        return fa is fb
    if isinstance(a, DictViewVar) or isinstance(b, DictViewVar):
        return False  # each keys()/values()/items() call makes a new view
    if a.is_const() and b.is_const():
        try:
            return a.const() is b.const()
        except Unsupported:
            return None
    ra, rb = getattr(a, "value", None), getattr(b, "value", None)
    from .objects import ModuleVar, ObjectVar

    if isinstance(a, ObjectVar) and isinstance(b, ObjectVar):
        if ra is not None and rb is not None:
            return ra is rb
        return False
    if isinstance(a, TensorVar) and isinstance(b, TensorVar):
        return a.node is b.node
    if (
        isinstance(a, ListVar | DictVar)
        and isinstance(b, ListVar | DictVar)
        and (a.source is None or b.source is None)
    ):
        # distinct Vars; one made in the trace (a new object), and wrap() gives one Var per
        # real object: never the same object
        return False
    if (a.is_const() and not isinstance(b, ModuleVar | ObjectVar)) or (
        b.is_const() and not isinstance(a, ModuleVar | ObjectVar)
    ):
        # a constant vs a tensor/container/function: never the same object
        from .functions import NestedFunctionVar, UserFunctionVar

        never_const = TensorVar | SeqVar | DictVar | NestedFunctionVar | UserFunctionVar
        if isinstance(a, never_const) or isinstance(b, never_const):
            return False
    if a.is_const() or b.is_const():
        if isinstance(a, ObjectVar | ModuleVar) or isinstance(b, ObjectVar | ModuleVar):
            return False
    return None


def compare_eq(tx, a: Var, b: Var) -> bool:
    """Equality as containers decide it (``PyObject_RichCompareBool``): the same object is
    equal to itself without calling ``__eq__`` (a tensor in a list, a tuple compared with
    itself)."""
    if identity(a, b) is True:
        return True
    r = binary_op(tx, operator.eq, a, b)
    if not r.is_const():
        raise Unsupported("equality that depends on tensor data")
    return bool(r.const())


def is_op(a, b) -> bool:
    same = identity(a, b)
    if same is None:
        raise Unsupported(f"cannot decide identity of {a} and {b}")
    return same


def contains(tx, container: Var, item: Var) -> bool:
    if isinstance(container, SeqVar | SetVar | DictVar | DictViewVar):
        r = container.call_method(tx, "__contains__", [item], {})
        return bool(r.const())
    if container.is_const() and item.is_const():
        return item.const() in container.const()
    from .objects import ModuleVar, ObjectVar

    if isinstance(container, ModuleVar):
        return bool(container.call_method(tx, "__contains__", [item], {}).const())
    if isinstance(container, ObjectVar):
        from .user_operators import user_contains

        return user_contains(tx, container, item)
    raise Unsupported(f"`in` on {container}")


def python_type_of(v: Var):
    if isinstance(v, (SymNumVar, SeqVar)):
        return v.python_type()  # no specialisation of sizes for isinstance(n, int)
    if v.is_const():
        return type(v.const())
    return v.python_type()


class BuiltinVar(Var):
    """A Python builtin (or a stdlib C function); constant-folded where all inputs are constants."""

    def __init__(self, fn):
        self.fn = fn

    def is_const(self):
        return True

    def const(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def __repr__(self):
        return f"Builtin({getattr(self.fn, '__name__', self.fn)})"

    def reconstruct(self, cg):
        f = self.fn
        return lambda ctx: f

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstVar(getattr(self.fn, name))
        if isinstance(self.fn, type):
            from .objects import ClassVar
            from .stdlib_models import stdlib_class_var

            model = stdlib_class_var(self.fn)  # dict.fromkeys
            if model is not None and name in model.attrs:
                return model.getattr(tx, name)
            return ClassVar(self.fn).getattr(tx, name)
        raise Unsupported(f"attribute {name} of builtin")

    def call(self, tx, args, kwargs):
        fn = self.fn
        handler = _HANDLERS.get(fn)
        if handler is not None:
            r = handler(tx, *args, **kwargs)
            if r is not None:
                return r
        if (
            fn in FOLDABLE
            and all(a.is_const() for a in args)
            and all(v.is_const() for v in kwargs.values())
        ):
            try:
                r = fn(*[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()})
            except Exception as e:
                raise Unsupported(f"{type(e).__name__} from {getattr(fn, '__name__', fn)}()") from e
            return tx.output.wrap_const(r)
        if fn in _TENSOR_MATH and any(isinstance(a, TensorVar) for a in args):
            return tx.output.call_op("call_function", fn, args, kwargs)
        if fn in INPLACE_TO_BINARY or fn in BINARY.values() or fn in COMPARE.values():
            if len(args) == 2 and not kwargs:
                return binary_op(tx, fn, args[0], args[1])
        raise Unsupported(f"builtin {getattr(fn, '__name__', fn)} on these arguments")


_TENSOR_MATH = {
    abs,
    operator.neg,
    operator.pos,
    operator.invert,
    operator.not_,
    operator.abs,
    operator.getitem,
    math.sqrt,
} - {math.sqrt}


def _len(tx, x):
    if isinstance(x, TensorVar):
        if x.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return tx.output.size_var(x, 0)
    if x.is_const():
        return None
    if isinstance(x, SeqVar | DictVar | SetVar):
        return ConstVar(len(x.items))
    if isinstance(x, DictViewVar):
        return ConstVar(len(x.dict_var.items))
    return x.call_method(tx, "__len__", [], {})


def _isinstance(tx, obj, cls):
    if not cls.is_const():
        if isinstance(cls, SeqVar):
            return ConstVar(any(_isinstance(tx, obj, c).const() for c in cls.items))
        raise Unsupported("isinstance with a non-constant class")
    c = cls.const()
    t = python_type_of(obj)
    if isinstance(obj, TensorVar):
        ex_type = obj.python_type()  # the real input's type (its fake is a plain tensor)
        return ConstVar(
            issubclass(ex_type, c)
            if not isinstance(c, tuple)
            else any(issubclass(ex_type, k) for k in c)
        )
    value = getattr(obj, "value", None)
    if value is not None and not obj.is_const():
        return ConstVar(isinstance(value, c))
    return ConstVar(issubclass(t, c) if isinstance(c, type) else issubclass(t, tuple(c)))


def _getattr(tx, obj, name, *default):
    if not name.is_const():
        raise Unsupported("getattr with a non-constant name")
    if default:
        try:
            return tx.getattr_checked(obj, name.const())
        except _AttrMissing:
            return default[0]
    return tx.getattr_checked(obj, name.const())


class _AttrMissing(Unsupported):
    pass


def _hasattr(tx, obj, name):
    if not name.is_const():
        raise Unsupported("hasattr with a non-constant name")
    try:
        tx.getattr_checked(obj, name.const())
        return ConstVar(True)
    except _AttrMissing:
        return ConstVar(False)


def _setattr(tx, obj, name, value):
    obj.setattr(tx, name.const(), value)
    return ConstVar(None)


def _delattr(tx, obj, name):
    from .objects import ObjectVar

    if not name.is_const() or not isinstance(obj, ObjectVar):
        raise Unsupported("delattr on this value")
    obj.delattr(tx, name.const())
    return ConstVar(None)


def _iter_items(tx, x) -> list:
    return x.unpack(tx)


def _range(tx, *args):
    if all(a.is_const() for a in args):
        return ConstVar(range(*[a.const() for a in args]))
    raise Unsupported("range() over non-constants")


def _enumerate(tx, it, start=None):
    s = start.const() if start is not None else 0
    if any_shared(tx, [it]):  # pull from it one step at a time, as eager does
        return lazy_enumerate(tx, it, s)
    return ListIteratorVar(
        [TupleVar([ConstVar(i + s), v]) for i, v in enumerate(_iter_items(tx, it))]
    )


def _zip(tx, *its, **kw):
    if kw and not (set(kw) == {"strict"}):
        raise Unsupported("zip keywords")
    from .stdlib_models import InfiniteIterVar

    if any_shared(tx, its):  # zip(it, it): pull one step at a time, as eager does
        return lazy_zip(tx, its, strict=bool(kw.get("strict", ConstVar(False)).truth(tx)))
    if not kw and any(isinstance(i, InfiniteIterVar) for i in its):
        # zip(count(), xs): step the iterators in order, as eager does, until one ends
        iters = [i.get_iter(tx) for i in its]
        out = []
        while True:
            row = []
            for it in iters:
                v = it.next(tx) if isinstance(it, ListIteratorVar) else None
                if v is None:
                    if not isinstance(it, ListIteratorVar):
                        raise Unsupported(f"zip() over {it}")
                    return ListIteratorVar(out)
                row.append(v)
            out.append(TupleVar(row))
    lists = [_iter_items(tx, i) for i in its]
    if kw.get("strict") is not None and kw["strict"].const() and len({len(x) for x in lists}) > 1:
        raise Unsupported("zip(strict=True) length mismatch")
    return ListIteratorVar([TupleVar(list(t)) for t in zip(*lists)])


def _minmax(fn):
    def h(tx, *args, **kw):
        if kw:
            return None
        items = _iter_items(tx, args[0]) if len(args) == 1 else list(args)
        if all(i.is_const() for i in items):
            return tx.output.wrap_const(fn(i.const() for i in items))
        if len(items) == 2 and any(isinstance(i, TensorVar) for i in items):
            raise Unsupported(f"{fn.__name__}() on tensors (data-dependent)")
        raise Unsupported(f"{fn.__name__}() on non-constants")

    return h


def _sum(tx, it, start=None):
    items = _iter_items(tx, it)
    acc = start if start is not None else ConstVar(0)
    for i in items:
        acc = binary_op(tx, operator.add, acc, i)
    return acc


def _anyall(fn):
    def h(tx, it):
        vals = [i.truth(tx) for i in _iter_items(tx, it)]
        return ConstVar(fn(vals))

    return h


def _tuple(tx, it=None):
    if it is None:
        return TupleVar([])
    return TupleVar(_iter_items(tx, it))


def _list(tx, it=None):
    if it is None:
        return ListVar([])
    return ListVar(_iter_items(tx, it))


def _dict(tx, it=None, **kw):
    d = DictVar({})
    if it is not None:
        if isinstance(it, DictVar):
            d.items.update(it.items)
        else:
            for pair in _iter_items(tx, it):
                k, v = pair.unpack(tx)
                d.items[dict_key(tx, k)] = v
    d.items.update(kw)
    return d


def _set(tx, it=None):
    s = SetVar([])
    if it is not None:
        s.update_from(tx, it)  # set(a_set) copies its table, as eager's does
    return s


def _frozenset(tx, it=None):
    if it is None or it.is_const():
        return None  # folded
    if isinstance(it, SetVar):
        return ConstVar(frozenset(it.real))  # merged table to table, as eager does
    items = _iter_items(tx, it)
    if not all(i.is_const() for i in items):
        raise Unsupported("frozenset of non-constants")
    return ConstVar(frozenset(i.const() for i in items))


def _iter(tx, x):
    return x.get_iter(tx)


def _next(tx, it, *default):
    if isinstance(it, ListIteratorVar):
        v = it.next(tx)
        if v is None:
            if default:
                return default[0]
            raise Unsupported("StopIteration from next()")
        return v
    raise Unsupported("next() on this iterator")


def _reversed(tx, x):
    return ListIteratorVar(list(reversed(_iter_items(tx, x))))


def _sorted(tx, x, **kw):
    items = _iter_items(tx, x)
    if kw or not all(i.is_const() for i in items):
        raise Unsupported("sorted() of non-constants or with keywords")
    return ListVar([ConstVar(v) for v in sorted(i.const() for i in items)])


def _callable(tx, x):
    if x.is_const():
        return ConstVar(callable(x.const()))
    from .functions import BoundMethodVar, NestedFunctionVar, UserFunctionVar
    from .objects import ModuleVar

    if isinstance(
        x,
        UserFunctionVar | NestedFunctionVar | BoundMethodVar | ModuleVar | TorchFnVar | BuiltinVar,
    ):
        return ConstVar(True)
    if isinstance(x, TensorVar | SeqVar | DictVar):
        return ConstVar(False)
    raise Unsupported("callable() on this value")


def _type(tx, x, *rest):
    if rest:
        raise Unsupported("type() with 3 arguments")
    from .objects import ClassVar, ObjectVar

    if isinstance(x, ObjectVar):
        return tx.output.wrap(x.cls, x.cls_source())  # guarded class attributes
    return ClassVar(python_type_of(x))


def _map(tx, fn, *its):
    if any_shared(tx, its):
        return lazy_map(tx, fn, its)
    lists = [_iter_items(tx, i) for i in its]
    return ListIteratorVar([fn.call(tx, list(a), {}) for a in zip(*lists)])


def _filter(tx, fn, it):
    if any_shared(tx, [it]):
        return lazy_filter(tx, fn, it)
    out = []
    for v in _iter_items(tx, it):
        keep = (
            v.truth(tx) if fn.is_const() and fn.const() is None else fn.call(tx, [v], {}).truth(tx)
        )
        if keep:
            out.append(v)
    return ListIteratorVar(out)


def _bool(tx, x=None):
    if x is None:
        return ConstVar(False)
    return ConstVar(x.truth(tx))


def _print(tx, *a, **k):
    raise Unsupported("print() (side effect on stdout)")


def _super(tx, *args):
    return tx.make_super(args)


def _id(tx, x):
    v = getattr(x, "value", None)
    if v is not None and getattr(x, "source", None) is not None:
        return ConstVar(id(v))
    raise Unsupported("id() of a traced value")


def _str(tx, x=None):
    if x is None:
        return ConstVar("")
    if x.is_const():
        return None
    raise Unsupported("str() of a non-constant")


def _int_float(fn):
    def h(tx, *args):
        if args and isinstance(args[0], TensorVar):
            raise Unsupported(f"{fn.__name__}() of a tensor (reads data)")
        return None

    return h


def _abs(tx, x):
    if isinstance(x, TensorVar):
        return tx.output.call_op("call_function", operator.abs, [x], {})
    if isinstance(x, NDArrayVar):
        return array_unary(tx, operator.abs, x)
    from .objects import ObjectVar

    if isinstance(x, ObjectVar):
        from .user_operators import user_unary

        return user_unary(tx, abs, x)
    return None


def _partial(tx, fn, *args, **kw):
    return PartialVar(fn, list(args), dict(kw))


class PartialVar(Var):
    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def reconstruct(self, cg):
        f = cg.rebuild(self.fn)
        a = [cg.rebuild(x) for x in self.args]
        k = {n: cg.rebuild(x) for n, x in self.kwargs.items()}
        return lambda ctx: functools.partial(
            f(ctx), *[x(ctx) for x in a], **{n: x(ctx) for n, x in k.items()}
        )


_HANDLERS = {
    len: _len,
    isinstance: _isinstance,
    getattr: _getattr,
    hasattr: _hasattr,
    setattr: _setattr,
    delattr: _delattr,
    range: _range,
    enumerate: _enumerate,
    zip: _zip,
    min: _minmax(min),
    max: _minmax(max),
    sum: _sum,
    any: _anyall(any),
    all: _anyall(all),
    tuple: _tuple,
    list: _list,
    dict: _dict,
    set: _set,
    frozenset: _frozenset,
    iter: _iter,
    next: _next,
    reversed: _reversed,
    sorted: _sorted,
    callable: _callable,
    type: _type,
    map: _map,
    filter: _filter,
    bool: _bool,
    print: _print,
    super: _super,
    id: _id,
    str: _str,
    int: _int_float(int),
    float: _int_float(float),
    abs: _abs,
    functools.partial: _partial,
}


# torch-level callables live in torch_functions.py; re-exported for existing imports.
from .torch_functions import (  # noqa: E402
    GRAD_CTX_CLASSES,
    TorchFnVar,
    is_torch_callable,
    make_grad_ctx,
)

__all__ = ["GRAD_CTX_CLASSES", "TorchFnVar", "is_torch_callable", "make_grad_ctx"]

from .stdlib_models import install_function_models  # noqa: E402

install_function_models(_HANDLERS)

builtins_names = set(dir(builtins))
