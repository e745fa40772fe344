"""Wrapping real Python values met during the trace into symbolic values, with guards."""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import inspect
import os
import sys
import types

import torch

from .exc import Unsupported
from .source import Source
from .variables.base import ConstVar, Var, is_const_value
from .variables.builtins import (
    GRAD_CTX_CLASSES,
    BuiltinVar,
    PartialVar,
    TorchFnVar,
    is_torch_callable,
)
from .variables.containers import DictVar, ListVar, TupleVar, note_frame_container
from .variables.functions import BoundMethodVar, UserFunctionVar
from .variables.numpy_arrays import (
    NumpyFnVar,
    NumpyScalarTypeVar,
    is_numpy_callable,
    is_numpy_scalar_type,
)
from .variables.objects import ClassVar, ModuleVar, ObjectVar, PythonModuleVar
from .variables.side_calls import wrap_special


class GradCtxClassVar(ClassVar):
    def call(self, tx, args, kwargs):
        from .variables.builtins import make_grad_ctx

        return make_grad_ctx(self.cls, args, kwargs)


def _made_per_call(fn) -> bool:
    code = fn.__code__
    name = getattr(code, "co_qualname", fn.__qualname__)
    return "<locals>" in name or code.co_name == "<lambda>"


def _is_user_function(fn) -> bool:
    mod = getattr(fn, "__module__", None) or ""
    return not (mod == "torch" or mod.startswith("torch."))


def _is_numpy_scalar(value) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.generic) and not isinstance(value, np.object_)


def wrap_value(out, value, source):
    """``out`` is the OutputGraph (for guards, inputs and identity de-duplication)."""
    g = out.guards
    src = source.expr if source is not None else None

    if isinstance(value, torch.Tensor):
        return out.tensor_input(value, source)
    if type(value) is int and src is not None:
        symbolic = out.int_input(value, source)
        if symbolic is not None:
            return symbolic
    if is_const_value(value):
        if src is not None:
            if isinstance(value, types.CodeType):
                g.id_match(src, value)
            else:
                g.constant_match(src, value)
        return ConstVar(value, source)
    if value is os.environ:
        return EnvironVar(source)
    if (isinstance(value, (types.FunctionType, type))) and _hashable_in(value, _FOLD_ON_REAL):
        return FoldOnRealVar(value)
    if isinstance(value, enum.Enum):
        if src is not None:
            g.id_match(src, value)
        return ConstVar(value, source)
    if isinstance(value, types.ModuleType):
        if src is not None and not PythonModuleVar(value).trusted:
            g.id_match(src, value)
        return PythonModuleVar(value, source)
    if isinstance(value, torch.nn.Module):
        if src is not None:
            g.id_match(src, value)
        return ModuleVar(value, source)
    if isinstance(value, type):
        if src is not None:
            g.id_match(src, value)
        from .variables.stdlib_models import stdlib_class_var

        model = stdlib_class_var(value) if value is not dict else None
        if model is not None:  # itertools.chain, collections.deque, ...
            return model
        if value in GRAD_CTX_CLASSES:
            return GradCtxClassVar(value, source)
        if value is torch.autocast or value is torch.cpu.amp.autocast:
            from .variables.objects import AutocastClassVar

            return AutocastClassVar(value, source)
        if value.__module__ == "builtins" or value is functools.partial:
            return BuiltinVar(value)
        if value is torch.set_grad_enabled:
            return TorchFnVar(value, source)
        if is_numpy_scalar_type(value):
            return NumpyScalarTypeVar(value, source)
        return ClassVar(value, source)
    if type(value) is list and source is not None:
        g.type_match(src, value)  # length and items: guarded when the trace reads them
        return ListVar.append_only(out, value, source)
    if (
        isinstance(value, (tuple, list))
        and type(value) in (tuple, list)
        or (isinstance(value, tuple) and hasattr(type(value), "_fields"))
    ):
        if src is not None:
            g.length(src, value)
        items = [
            out.wrap(v, source.item(i) if source is not None else None) for i, v in enumerate(value)
        ]
        if type(value) is list:
            return ListVar(items, source)
        return TupleVar(items, source, py_type=type(value))
    if type(value) is collections.deque and source is not None:
        from .variables.collections_models import DequeVar

        g.length(src, value)
        g.add("DEQUE_MAXLEN", src, f"{src}.maxlen == {value.maxlen!r}")
        items = [out.wrap(v, source.item(i)) for i, v in enumerate(value)]
        var = DequeVar([], value.maxlen, source)
        var.items = items
        note_frame_container(out, var, "list")
        return var
    if type(value) in _DICT_TYPES or (
        isinstance(value, dict) and dataclasses.is_dataclass(type(value))
    ):
        from .variables.dict_views import is_plain_key, wrappable_key

        bad = next((k for k in value if not wrappable_key(k)), None)
        if bad is not None:
            raise Unsupported(f"dict with a key of type {type(bad).__name__}")
        if src is not None:
            g.dict_keys(src, value)  # equal by value (constants) or identity (the others)

        def item_source(i, k):
            if source is None:
                return None
            if is_plain_key(k):
                return source.item(k)
            return Source(f"list({src}.values())[{i}]")  # keys in order are guarded

        items = {k: out.wrap(v, item_source(i, k)) for i, (k, v) in enumerate(value.items())}
        if source is not None:
            for i, k in enumerate(value):
                if not is_const_value(k) and not isinstance(k, enum.Enum | tuple):
                    # a module/class/function key: read back through the dict (parameters
                    # of a module key are graph inputs)
                    out.wrap(k, Source(f"list({src}.keys())[{i}]"))
        var = _dict_var(out, value, items, source)
        if source is not None:
            note_frame_container(out, var, "dict")
        return var
    if is_numpy_callable(value):  # np.exp, np.sum, ...: traced as torch ops
        if src is not None:
            g.id_match(src, value)
        return NumpyFnVar(value, source)
    if _is_numpy_scalar(value):  # np.float32(1.5): immutable, a constant like a float
        if src is not None:
            g.constant_match(src, value)
        return ConstVar(value, source)
    special = wrap_special(out, value, source)
    if special is not None:  # lru_cache functions, logging.<level>()
        return special
    if isinstance(value, (types.FunctionType,)):
        if not _is_user_function(value) and is_torch_callable(value):
            if src is not None:
                g.id_match(src, value)
            return TorchFnVar(value, source)
        if src is not None and _made_per_call(value):
            # A nested function or lambda is a new object each time its ``def`` runs (a
            # closure made per call, a decorator's wrapper): guard what it runs, not which
            # object it is. Its closure, defaults and attributes are read (and guarded)
            # through this source; its identity is guarded when the trace decides on it.
            g.add(
                "FUNCTION_CODE",
                src,
                f"type({src}) is {g._const(types.FunctionType)} and "
                f"{src}.__code__ is {g._const(value.__code__)} and "
                f"{src}.__globals__ is {g._const(value.__globals__)}",
            )
            return UserFunctionVar(value, source, pin=lambda: g.id_match(src, value))
        if src is not None:
            g.id_match(src, value)
        return UserFunctionVar(value, source)
    if isinstance(value, types.MethodType):
        self_src = source.attr("__self__") if source is not None else None
        fn_src = source.attr("__func__") if source is not None else None
        return BoundMethodVar(
            out.wrap(value.__func__, fn_src), out.wrap(value.__self__, self_src), source
        )
    if isinstance(value, functools.partial):
        if src is not None:
            g.type_match(src, value)
        # args and keywords as containers: their length and keyword names are guarded
        args = out.wrap(value.args, source.attr("args") if source else None)
        kw = out.wrap(value.keywords, source.attr("keywords") if source else None)
        return PartialVar(
            out.wrap(value.func, source.attr("func") if source else None),
            [ConstVar(a) for a in args.const()] if args.is_const() else list(args.items),
            dict(kw.items),
        )
    if callable(value) and is_torch_callable(value):
        if isinstance(
            value,
            (
                types.BuiltinFunctionType,
                types.MethodDescriptorType,
                types.WrapperDescriptorType,
                torch._ops.OpOverloadPacket,
                torch._ops.OpOverload,
            ),
        ) or isinstance(value, types.FunctionType):
            if src is not None:
                # read from an argument, an attribute or a global (attributes of torch's
                # modules come without a source): another function may be there next call
                g.id_match(src, value)
            return TorchFnVar(value, source)
    if value is tuple.__new__:  # namedtuple's _make: tuple.__new__(cls, iterable)
        from .variables.stdlib_models import TupleNewVar

        return TupleNewVar()
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        self_ = getattr(value, "__self__", None)
        if self_ is None or isinstance(self_, types.ModuleType):
            if src is not None:
                g.id_match(src, value)
            return BuiltinVar(value)
        raise Unsupported(f"bound C method {value!r}")
    if isinstance(value, (torch.finfo, torch.iinfo)):
        return OpaqueConstVar(value)
    from .variables.dict_views import DICT_ITER_TYPES

    if type(value) in DICT_ITER_TYPES and source is not None:
        # A dict iterator in the frame state (a loop resumed after a break): its remaining
        # items, from __reduce__; what the trace consumes is replayed by next() calls.
        from .variables.containers import ListIteratorVar

        g.type_match(src, value)
        rest = out.wrap(value.__reduce__()[1][0], Source(f"{src}.__reduce__()[1][0]"))
        return ListIteratorVar(rest.items, source=source, base_index=None)
    if type(value) in (_LIST_ITER, _TUPLE_ITER) and source is not None:
        red = value.__reduce__()
        if len(red[1]) != 1 or not isinstance(red[1][0], (list, tuple)):
            raise Unsupported("iterator over a non-sequence")
        seq = red[1][0]
        idx = red[2] if len(red) > 2 else len(seq)
        g.type_match(src, value)
        seq_src = Source(f"{src}.__reduce__()[1][0]")
        g.add(
            "CONSTANT_MATCH", src, f"{src}.__reduce__()[2:] == {(idx,) if len(red) > 2 else ()!r}"
        )
        seq_var = out.wrap(seq, seq_src)
        from .variables.containers import ListIteratorVar, ListLiveIterVar

        if type(value) is _LIST_ITER and isinstance(seq_var, ListVar) and len(red) > 2:
            return ListLiveIterVar(seq_var, index=idx, source=source)  # sees appends
        return ListIteratorVar(seq_var.items[idx:], source=source, base_index=idx)
    if isinstance(value, (types.GeneratorType, types.CoroutineType)):
        raise Unsupported("generator object from outside the frame")
    if type(value) is set and all(is_const_value(x) for x in value):
        if src is not None:
            # equal sets can iterate in other orders (insertion history): guard the order
            order = list(value)
            g.add(
                "SET_MATCH",
                src,
                f"type({src}) is set and list({src}) == {g._const(order)} and "
                f"{g.types_expr(src, order)}",
            )
        from .variables.containers import SetVar

        var = SetVar.from_frame(value, source) if source is not None else SetVar([])
        if source is None:
            var.update_from(None, ConstVar(frozenset(value)))
        if source is not None:
            note_frame_container(out, var, "set")
        return var
    if isinstance(value, (set, frozenset)):
        raise Unsupported("set from outside the frame")
    # an instance of a class with a metaclass: its attributes are looked up on its class as
    # for any object (class attribute reads through the metaclass are checked by ClassVar)
    if src is not None:
        g.type_match(src, value)
    return ObjectVar(type(value), value, source)


_LIST_ITER = type(iter([]))
_TUPLE_ITER = type(iter(()))


_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)


def _dict_var(out, value, items, source):
    from .variables.collections_models import CounterVar, DefaultDictVar

    if type(value) is collections.defaultdict:
        f = value.default_factory
        return DefaultDictVar(
            items, out.wrap(f, source.attr("default_factory") if source else None), source
        )
    if type(value) is collections.Counter:
        return CounterVar(items, source)
    return DictVar(items, source, py_type=type(value))


class OpaqueConstVar(ConstVar):
    """An immutable library object (``torch.finfo``, ``inspect.Signature``): reads fold."""

    def getattr(self, tx, name):
        v = getattr(self.value, name)
        if is_const_value(v):
            return ConstVar(v)
        if callable(v):
            from .variables.functions import ConstMethodVar

            return ConstMethodVar(self.value, name)
        return OpaqueConstVar(v)

    def unpack(self, tx):
        return [OpaqueConstVar(x) if not is_const_value(x) else ConstVar(x) for x in self.value]


def real_value_of(var):
    """The real Python object behind a symbolic value, when the trace knows it exactly."""
    from .variables.functions import BoundMethodVar

    if isinstance(var, ConstVar):
        return var.value
    if isinstance(var, UserFunctionVar):
        return var.exact()
    if isinstance(var, ClassVar):
        return var.cls
    if isinstance(var, ObjectVar) and var.value is not None and not var.pending:
        return var.value
    if isinstance(var, BoundMethodVar):
        f, s = real_value_of(var.fn_var), real_value_of(var.self_var)
        if f is not None and s is not None:
            return types.MethodType(f, s)
    return None


class FoldOnRealVar(Var):
    """A pure library function on objects the trace knows exactly (``inspect.signature``):
    evaluated at trace time. Its result depends only on guarded identities."""

    def __init__(self, fn):
        self.fn = fn

    def is_const(self):
        return True

    def const(self):
        return self.fn

    def call(self, tx, args, kwargs):
        vals = [real_value_of(a) for a in args]
        kvals = {k: real_value_of(v) for k, v in kwargs.items()}
        if any(v is None for v in vals) or any(v is None for v in kvals.values()):
            raise Unsupported(f"{self.fn.__name__}() on values only known symbolically")
        try:
            return OpaqueConstVar(self.fn(*vals, **kvals))
        except Exception as e:
            raise Unsupported(f"{type(e).__name__} from {self.fn.__name__}()") from e

    def reconstruct(self, cg):
        f = self.fn
        return lambda ctx: f


_FOLD_ON_REAL = {inspect.signature, torch.finfo, torch.iinfo}


def _hashable_in(v, s):
    try:
        return v in s
    except TypeError:
        return False


class EnvironVar(Var):
    """``os.environ``: reads become constants guarded on the variable's current value."""

    def __init__(self, source):
        self.source = source

    def call_method(self, tx, name, args, kwargs):
        if (
            name not in ("get", "__getitem__", "__contains__")
            or kwargs
            or not all(a.is_const() for a in args)
        ):
            raise Unsupported(f"os.environ.{name}")
        key = args[0].const()
        cur = os.environ.get(key)
        tx.output.guards.add("ENV", "", f"__import__('os').environ.get({key!r}) == {cur!r}")
        if name == "__contains__":
            return ConstVar(cur is not None)
        if cur is None:
            if name == "get":
                return args[1] if len(args) > 1 else ConstVar(None)
            raise Unsupported(f"KeyError {key!r} from os.environ")
        return ConstVar(cur)

    def getattr(self, tx, name):
        from .variables.functions import BoundVarMethod

        return BoundVarMethod(self, name)
