"""nn.Modules, user objects and classes, Python modules, cells, grad-mode contexts."""

from __future__ import annotations

import abc
import collections.abc
import contextlib
import dataclasses
import inspect
import types

import torch

from ..exc import Unsupported
from ..module_hooks import hookless, no_global_hooks
from ..source import Source
from .base import ConstVar, Var
from .class_state import class_source, pending_class_attr, set_class_attr
from .containers import DictVar, TupleVar
from .functions import BoundMethodVar, UserFunctionVar

_MISSING = object()


def _class_attr(cls, name):
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return _MISSING


def _bind_class_attr(tx, obj_var, cls, name, attr, cls_source: Source | None):
    """Method/property/attribute found on the class of ``obj_var``."""
    if isinstance(attr, property):
        if attr.fget is None:
            raise Unsupported(f"write-only property {name!r}")
        return UserFunctionVar(attr.fget, _fn_source(cls_source, name, "fget")).call(
            tx, [obj_var], {}
        )
    if isinstance(attr, staticmethod):
        return tx.output.wrap(attr.__func__, _fn_source(cls_source, name, "__func__", static=True))
    if isinstance(attr, classmethod):
        fn = attr.__func__
        return BoundMethodVar(tx.output.wrap(fn, None), ClassVar(cls, cls_source))
    from .side_calls import bind_special

    special = bind_special(tx, obj_var, attr, cls_source.attr(name) if cls_source else None)
    if special is not None:  # lru_cache functions, Logger methods
        return special
    if isinstance(attr, types.FunctionType):
        return BoundMethodVar(
            UserFunctionVar(attr, cls_source.attr(name) if cls_source else None), obj_var
        )
    if isinstance(
        attr,
        (
            types.BuiltinFunctionType,
            types.WrapperDescriptorType,
            types.MethodDescriptorType,
            types.MemberDescriptorType,
            types.GetSetDescriptorType,
        ),
    ):
        raise Unsupported(f"C-level attribute {cls.__name__}.{name}")
    if hasattr(type(attr), "__get__"):
        raise Unsupported(f"descriptor {cls.__name__}.{name}")
    return tx.output.wrap(attr, cls_source.attr(name) if cls_source else None)


def _fn_source(cls_source, name, attr, static=False):
    if cls_source is None:
        return None
    return Source(f"inspect.getattr_static({cls_source.expr}, {name!r}).{attr}")


def _implicit_special(name):
    """Special methods (``__len__``, ``__enter__``, ...) that the interpreter looks up on the
    type, bypassing a custom ``__getattribute__``; capture reads them that way too."""
    return name.startswith("__") and name.endswith("__") and name not in ("__dict__", "__class__")


class ObjectVar(Var):
    """A user-defined object: a real one from the inputs (with a source), or one created in
    the trace (``value is None``).  Attribute writes are kept here and replayed after the graph."""

    def __init__(self, cls, value=None, source=None):
        self.cls = cls
        self.value = value
        self.source = source
        self.pending: dict[str, Var] = {}
        self.deleted: set[str] = set()

    def python_type(self):
        return self.cls

    def cls_source(self):
        if self.source is not None:
            return Source(f"type({self.source.expr})")
        return class_source(self.cls)

    def truth(self, tx):
        from .user_operators import user_truth

        return user_truth(tx, self)

    def getattr(self, tx, name):
        if self.value is None and not _implicit_special(name):
            ga = _class_attr(self.cls, "__getattribute__")
            if ga is not object.__getattribute__:
                # An object made in the trace: its own lookup runs inlined (it reaches the
                # plain lookup through super().__getattribute__).
                if not isinstance(ga, types.FunctionType):
                    raise Unsupported(f"C-level __getattribute__ of {self.cls.__name__}")
                return UserFunctionVar(ga).call(tx, [self, ConstVar(name)], {})
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__``, plus ``__getattr__`` when the lookup fails."""
        if name in self.pending:
            return self.pending[name]
        if name in self.deleted:
            raise Unsupported(f"AttributeError {name!r} (deleted)")
        if name == "__dict__" and self.value is None:
            return _instance_dict(self)
        if name == "__class__":
            # Through wrap: special classes (torch.no_grad, autocast, ...) keep their handling.
            return tx.output.wrap(self.cls, self.cls_source())
        if name == "__dict__":
            raise Unsupported("__dict__ access")
        if (
            self.value is not None
            and self.source is not None
            and (_class_attr(self.cls, "__getattribute__") is not object.__getattribute__)
        ):
            return self._real_getattr(tx, name)
        attr = _class_attr(self.cls, name)
        if isinstance(attr, property) or (
            attr is not _MISSING
            and hasattr(type(attr), "__set__")
            and not isinstance(attr, types.FunctionType)
        ):
            return _bind_class_attr(tx, self, self.cls, name, attr, self.cls_source())
        if self.value is not None:
            d = getattr(self.value, "__dict__", None)
            if d is not None and name in d:
                return tx.output.wrap(d[name], self.source.attr(name) if self.source else None)
        written = pending_class_attr(tx, self.cls, name)
        if written is not None:
            return written
        if attr is not _MISSING:
            return _bind_class_attr(tx, self, self.cls, name, attr, self.cls_source())
        return self.getattr_fallback(tx, name)

    def unpack(self, tx):
        it = _class_attr(self.cls, "__iter__")
        if it is collections.abc.Sequence.__iter__:
            it = _MISSING  # the ABC's default: index until IndexError, i.e. len/getitem
        if isinstance(it, types.FunctionType):
            r = UserFunctionVar(it).call(tx, [self], {})
            from .containers import ListIteratorVar

            if isinstance(r, ListIteratorVar):
                return r.unpack(tx)
            if r is self:
                raise Unsupported(f"{self.cls.__name__} is its own iterator")
            return r.unpack(tx)
        ln = _class_attr(self.cls, "__len__")
        gi = _class_attr(self.cls, "__getitem__")
        if (
            it is _MISSING
            and isinstance(ln, types.FunctionType)
            and isinstance(gi, types.FunctionType)
        ):
            n = UserFunctionVar(ln).call(tx, [self], {})
            if not n.is_const():
                raise Unsupported("__len__ is not a constant")
            return [UserFunctionVar(gi).call(tx, [self, ConstVar(i)], {}) for i in range(n.const())]
        raise Unsupported(f"iterating over {self.cls.__name__}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return self.getattr(tx, "__len__").call(tx, args, kwargs)
        return self.getattr(tx, name).call(tx, args, kwargs)

    def _real_getattr(self, tx, name):
        """Attribute read through the class's own (custom) lookup; the guard re-reads it."""
        attr = _class_attr(self.cls, name)
        if isinstance(attr, (types.FunctionType, property)):
            return _bind_class_attr(tx, self, self.cls, name, attr, self.cls_source())
        try:
            v = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(
                f"AttributeError: {self.cls.__name__!r} has no attribute {name!r}"
            ) from e
        return tx.output.wrap(v, self.source.attr(name))

    def getattr_fallback(self, tx, name):
        if self.value is not None and self.source is not None and not isinstance(self, ModuleVar):
            if _class_attr(self.cls, "__getattr__") is not _MISSING:
                return self._real_getattr(tx, name)
        if _class_attr(self.cls, "__getattr__") is not _MISSING:
            ga = _class_attr(self.cls, "__getattr__")
            if isinstance(ga, types.FunctionType):
                return UserFunctionVar(ga).call(tx, [self, ConstVar(name)], {})
        msg = f"AttributeError: {self.cls.__name__!r} has no attribute {name!r}"
        if self.value is None:  # made in the trace: its attributes are all known
            from .builtins import _AttrMissing

            raise _AttrMissing(msg)
        raise Unsupported(msg)

    def setattr(self, tx, name, value):
        sa = _class_attr(self.cls, "__setattr__")
        if sa is not object.__setattr__ and not isinstance(self, ModuleVar):
            if self.value is None and isinstance(sa, types.FunctionType):
                # made in the trace: run its own __setattr__ (it ends in object.__setattr__)
                UserFunctionVar(sa).call(tx, [self, ConstVar(name), value], {})
                return
            raise Unsupported(f"custom __setattr__ on {self.cls.__name__}")
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        attr = _class_attr(self.cls, name)
        if attr is not _MISSING and hasattr(type(attr), "__set__"):
            raise Unsupported(f"setting descriptor {name!r}")
        tx.output.side_effects.mutate(self)
        self.pending[name] = value
        self.deleted.discard(name)

    def delattr(self, tx, name):
        if _class_attr(self.cls, "__delattr__") is not object.__delattr__:
            raise Unsupported(f"custom __delattr__ on {self.cls.__name__}")
        self.generic_delattr(tx, name)

    def generic_delattr(self, tx, name):
        if self.value is None and name not in self.pending:
            raise Unsupported(f"AttributeError: deleting {name!r}")
        attr = _class_attr(self.cls, name)
        if attr is not _MISSING and hasattr(type(attr), "__delete__"):
            raise Unsupported(f"deleting descriptor {name!r}")
        tx.output.side_effects.mutate(self)
        self.pending.pop(name, None)
        if self.value is not None:  # a real object: the attribute is deleted on replay
            self.deleted.add(name)

    def call(self, tx, args, kwargs):
        call = _class_attr(self.cls, "__call__")
        if isinstance(call, types.FunctionType):
            return UserFunctionVar(
                call, Source(f"type({self.source.expr}).__call__") if self.source else None
            ).call(tx, [self, *args], kwargs)
        raise Unsupported(f"calling {self.cls.__name__} object")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        if self.value is not None:
            real = self.value
            return lambda ctx: real  # the same object; its pending writes are replayed
        cls = self.cls
        attrs = {k: cg.rebuild(v) for k, v in self.pending.items()}

        def make(ctx):
            o = object.__new__(cls)  # not a custom __new__: the attributes are set below
            for k, v in attrs.items():
                object.__setattr__(o, k, v(ctx))
            return o

        return make

    def __repr__(self):
        return f"Object({self.cls.__name__}, {self.source})"


class ModuleVar(ObjectVar):
    """An nn.Module: parameters/buffers become graph inputs; calls inline ``forward``."""

    def __init__(self, module, source=None):
        super().__init__(type(module), module, source)

    def getattr(self, tx, name):
        if name in self.pending:
            return self.pending[name]
        mod = self.value
        if name == "__class__":
            return ClassVar(self.cls, self.cls_source())
        attr = _class_attr(self.cls, name)
        if isinstance(attr, property):
            return _bind_class_attr(tx, self, self.cls, name, attr, self.cls_source())
        src = self.source.attr(name) if self.source is not None else None
        d = mod.__dict__
        if name in d:
            v = tx.output.wrap(d[name], src)
            if name in ("_modules", "_parameters", "_buffers") and isinstance(v, DictVar):
                # calls read the real module (forward, iteration): its tables stay as they are
                v.read_only = f"changing {name} of {self.cls.__name__} in the traced code"
            return v
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return tx.output.wrap(s[name], src)
        written = pending_class_attr(tx, self.cls, name)
        if written is not None:
            return written
        if attr is not _MISSING:
            if name in ("__call__", "_call_impl", "_wrapped_call_impl"):
                return ModuleCallVar(self)
            if name in _MODULE_ITER_METHODS:
                from .functions import BoundVarMethod

                return BoundVarMethod(self, name)
            return _bind_class_attr(tx, self, self.cls, name, attr, self.cls_source())
        return self.getattr_fallback(tx, name)

    def call(self, tx, args, kwargs):
        mod = self.value
        if not (hookless(mod.__dict__) and no_global_hooks()):
            raise Unsupported(_hooks_reason(self.cls))
        if self.source is not None:
            # a hook, or a forward assigned on the instance, added later must not be skipped
            tx.output.guards.no_module_hooks(self.source.expr, "forward" in mod.__dict__)
        fwd = _class_attr(self.cls, "forward")
        if "forward" in mod.__dict__:
            return tx.output.wrap(
                mod.__dict__["forward"], self.source.attr("forward") if self.source else None
            ).call(tx, args, kwargs)
        pre = [self]
        if isinstance(fwd, staticmethod):
            fwd, pre = fwd.__func__, []
        elif isinstance(fwd, classmethod):
            fwd, pre = fwd.__func__, [ClassVar(self.cls, self.cls_source())]
        if not isinstance(fwd, types.FunctionType):
            raise Unsupported(f"{self.cls.__name__}.forward is not a Python function")
        fsrc = Source(f"type({self.source.expr}).forward") if self.source is not None else None
        if not pre:
            fsrc = None
        return UserFunctionVar(fwd, fsrc).call(tx, [*pre, *args], kwargs)

    def _guard_members(self, tx):
        """What a container holds decides the trace (loops over it, its length, its keys):
        guarded on the registry dict, so an appended or removed member recompiles."""
        if self.source is None:
            return
        mod = self.value
        for store in ("_modules", "_parameters"):
            members = mod.__dict__.get(store)
            if members:
                tx.output.guards.dict_keys(f"{self.source.expr}.{store}", members)

    def unpack(self, tx):
        mod = self.value
        self._guard_members(tx)
        if isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [
                tx.output.wrap(m, self.source.item(i) if self.source else None)
                for i, m in enumerate(mod)
            ]
        if isinstance(mod, torch.nn.ModuleDict):
            return [ConstVar(k) for k in mod.keys()]
        if isinstance(mod, (torch.nn.ParameterList,)):
            return [
                tx.output.wrap(p, self.source.item(i) if self.source else None)
                for i, p in enumerate(mod)
            ]
        raise Unsupported(f"iterating over {self.cls.__name__}")

    def call_method(self, tx, name, args, kwargs):
        mod = self.value
        container = isinstance(
            mod,
            (
                torch.nn.ModuleList,
                torch.nn.Sequential,
                torch.nn.ModuleDict,
                torch.nn.ParameterList,
                torch.nn.ParameterDict,
            ),
        )
        if container and name in (
            "__getitem__",
            "__len__",
            "__contains__",
            "items",
            "keys",
            "values",
        ):
            self._guard_members(tx)
        if container and name == "__getitem__":
            key = args[0]
            if not key.is_const():
                raise Unsupported("non-constant module container index")
            k = key.const()
            if isinstance(k, slice):
                items = self.unpack(tx)[k]
                if isinstance(mod, torch.nn.Sequential):
                    return SequentialSliceVar(items)
                return TupleVar(items)
            src = self.source.item(k) if self.source is not None else None
            return tx.output.wrap(mod[k], src)
        if container and name == "__len__":
            return ConstVar(len(mod))
        if (
            container
            and name in ("items", "keys", "values")
            and isinstance(mod, torch.nn.ModuleDict)
        ):
            keys = list(mod.keys())
            vals = [
                tx.output.wrap(mod[k], self.source.item(k) if self.source else None) for k in keys
            ]
            if name == "keys":
                return TupleVar([ConstVar(k) for k in keys])
            if name == "values":
                return TupleVar(vals)
            return TupleVar([TupleVar([ConstVar(k), v]) for k, v in zip(keys, vals)])
        if container and name == "__contains__":
            return ConstVar(args[0].const() in mod)
        if name in (
            "parameters",
            "named_parameters",
            "buffers",
            "named_buffers",
            "children",
            "named_children",
            "modules",
            "named_modules",
        ):
            if args or kwargs:
                raise Unsupported(f"Module.{name} with arguments")
            items = []
            named = name if name.startswith("named_") else f"named_{name}"
            for k, v in getattr(mod, named)():
                # every member keeps its attribute path: a submodule met here first and
                # read as an attribute later is the same Var, whose tensors are graph inputs
                var = tx.output.wrap(v, self._path_source(k))
                items.append(TupleVar([ConstVar(k), var]) if named == name else var)
            return TupleVar(items)
        return self.getattr(tx, name).call(tx, args, kwargs)

    def _path_source(self, dotted):
        if self.source is None:
            return None
        src = self.source
        for part in dotted.split(".") if dotted else []:
            src = src.attr(part)
        return src

    def setattr(self, tx, name, value):
        mod = self.value
        if name in mod._parameters or name in mod._modules:
            raise Unsupported(f"reassigning parameter/submodule {name!r}")
        if name in mod._buffers:
            raise Unsupported(f"reassigning buffer {name!r}")
        if isinstance(value, (ModuleVar,)):
            raise Unsupported("assigning a module attribute")
        tx.output.side_effects.mutate(self)
        self.pending[name] = value

    def __repr__(self):
        return f"Module({self.cls.__name__}, {self.source})"


# Read-only C methods of builtin containers, evaluated on the real object at trace time; the
# result is guarded through a source that calls the same method.
_PURE_C_METHODS = {
    "get",
    "__getitem__",
    "__contains__",
    "keys",
    "values",
    "items",
    "__len__",
    "copy",
    "index",
    "count",
}


class RealCMethodVar(Var):
    def __init__(self, obj_var, descr, name):
        self.obj_var = obj_var
        self.descr = descr
        self.name = name

    def call(self, tx, args, kwargs):
        owner = getattr(self.descr, "__objclass__", None)
        if self.name not in _PURE_C_METHODS or owner not in (
            dict,
            list,
            tuple,
            str,
            set,
            frozenset,
        ):
            raise Unsupported(f"C method {getattr(owner, '__name__', owner)}.{self.name}")
        if kwargs or not all(a.is_const() for a in args):
            raise Unsupported(f"{owner.__name__}.{self.name} with non-constant arguments")
        vals = [a.const() for a in args]
        result = self.descr(self.obj_var.value, *vals)
        src = None
        if self.obj_var.source is not None:
            arg_src = "".join(f", {v!r}" for v in vals)
            src = Source(f"{owner.__name__}.{self.name}({self.obj_var.source.expr}{arg_src})")
            if self.name in ("keys", "values", "items"):
                src = Source(f"list({src.expr})")
                result = list(result)
        elif self.name in ("keys", "values", "items"):
            result = list(result)
        return tx.output.wrap(result, src)


_MODULE_ITER_METHODS = (
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
)


class ModuleCallVar(Var):
    def __init__(self, mod):
        self.mod = mod

    def call(self, tx, args, kwargs):
        return self.mod.call(tx, args, kwargs)


class SequentialSliceVar(Var):
    def __init__(self, items):
        self.items = items

    def call(self, tx, args, kwargs):
        x = args[0]
        for m in self.items:
            x = m.call(tx, [x], {})
        return x

    def unpack(self, tx):
        return list(self.items)


class ClassVar(Var):
    """A class: attribute reads and construction of new objects inside the trace."""

    def __init__(self, cls, source=None):
        self.cls = cls
        self.source = source

    def python_type(self):
        return type(self.cls)

    def is_const(self):
        return True

    def const(self):
        return self.cls

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstVar(getattr(self.cls, name))
        written = pending_class_attr(tx, self.cls, name)
        if written is not None:
            return written
        if name == "__new__" and _class_attr(self.cls, name) is object.__new__:
            from .construction import ObjectNewVar

            return ObjectNewVar()
        _check_metaclass_lookup(self.cls, name)
        attr = _class_attr(self.cls, name)
        if attr is _MISSING:
            raise Unsupported(f"class attribute {self.cls.__name__}.{name}")
        plain = next((m for k, m in _PLAIN_OBJECT_METHODS if k is attr), None)
        if plain is not None:
            return _PlainAttrFn(plain)
        if isinstance(attr, types.FunctionType):
            return UserFunctionVar(attr, self.source.attr(name) if self.source else None)
        if isinstance(attr, classmethod):
            return BoundMethodVar(tx.output.wrap(attr.__func__, None), self)
        if isinstance(attr, staticmethod):
            return tx.output.wrap(attr.__func__, None)
        src = self.source or class_source(self.cls)
        return tx.output.wrap(getattr(self.cls, name), src.attr(name) if src else None)

    def setattr(self, tx, name, value):
        set_class_attr(tx, self.cls, name, value)

    def call(self, tx, args, kwargs):
        cls = self.cls
        if cls is contextlib._GeneratorContextManager:
            from .generator_ctx import GeneratorCtxVar

            return GeneratorCtxVar.make(tx, args, kwargs)
        if issubclass(cls, torch.nn.Module):
            from .nn_construct import construct_module

            return construct_module(tx, cls, args, kwargs)
        if issubclass(cls, BaseException):
            raise Unsupported(f"constructing exception {cls.__name__}")
        if dataclasses.is_dataclass(cls) and issubclass(cls, dict):
            return _model_output(tx, cls, args, kwargs)
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            from .functions import bind_args

            new = cls.__new__
            bound = bind_args(
                new.__code__,
                cls.__name__,
                [self, *args],
                kwargs,
                [tx.output.wrap_const(d) for d in (new.__defaults__ or ())],
                None,
            )
            return TupleVar([bound[f] for f in cls._fields], py_type=cls)
        from .construction import construct_object

        return construct_object(tx, self, args, kwargs)

    def reconstruct(self, cg):
        c = self.cls
        return lambda ctx: c

    def __repr__(self):
        return f"Class({self.cls.__name__})"


def _check_metaclass_lookup(cls, name):
    """``Cls.name`` through a metaclass that changes attribute lookup: not followed."""
    meta = type(cls)
    if meta in (type, abc.ABCMeta):
        return
    if meta.__getattribute__ is not type.__getattribute__:
        raise Unsupported(f"{cls.__name__}.{name} through metaclass {meta.__name__}")
    for k in meta.__mro__:
        if k is type or k is object:
            break
        if name in k.__dict__ and hasattr(type(k.__dict__[name]), "__set__"):
            # a data descriptor of the metaclass wins over the class's own attribute
            raise Unsupported(f"{cls.__name__}.{name} defined by metaclass {meta.__name__}")


def _model_output(tx, cls, args, kwargs):
    """transformers-style ModelOutput: an ordered dict of its non-None dataclass fields."""
    fields = [f.name for f in dataclasses.fields(cls)]
    vals = dict(zip(fields, args))
    vals.update(kwargs)
    items = {}
    for f in fields:
        v = vals.get(f)
        if v is None or (v.is_const() and v.const() is None):
            continue
        items[f] = v
    first = vals.get(fields[0]) if fields else None
    if first is not None and not (first.is_const() and first.const() is None):
        from .tensor import TensorVar

        if not isinstance(first, TensorVar) and len(items) == 1:
            raise Unsupported(f"{cls.__name__} built from a non-tensor first field")
    return DictVar(items, py_type=cls)


class PythonModuleVar(Var):
    def __init__(self, mod, source=None):
        self.mod = mod
        self.source = source
        name = mod.__name__
        self.trusted = name == "torch" or name.startswith("torch.") or name in _STDLIB_MODULES

    def python_type(self):
        return types.ModuleType

    def getattr(self, tx, name):
        try:
            v = getattr(self.mod, name)
        except AttributeError as e:
            raise Unsupported(f"module {self.mod.__name__} has no attribute {name}") from e
        # Library modules are assumed not to be patched while compiled code is live.
        src = None if self.trusted or self.source is None else self.source.attr(name)
        return tx.output.wrap(v, src)

    def reconstruct(self, cg):
        m = self.mod
        return lambda ctx: m


_STDLIB_MODULES = {
    "math",
    "operator",
    "functools",
    "itertools",
    "collections",
    "typing",
    "dataclasses",
    "inspect",
    "warnings",
    "numbers",
    "enum",
    "copy",
}


class CellVar(Var):
    """A cell: a real one (``real`` source) or one that lives only in the trace."""

    def __init__(self, source=None, contents: Var | None = None, real=None):
        self.source = source  # source of the cell object itself
        self.contents = contents
        self.real = real
        self.loaded = contents is not None or real is None

    def load(self, tx):
        if not self.loaded:
            try:
                v = self.real.cell_contents
            except ValueError as e:
                raise Unsupported("empty cell") from e
            self.contents = tx.output.wrap(
                v, Source(f"{self.source.expr}.cell_contents") if self.source else None
            )
            self.loaded = True
        if self.contents is None:
            raise Unsupported("empty cell (NameError)")
        return self.contents

    def store(self, tx, v):
        tx.output.side_effects.mutate(self)
        self.contents = v
        self.loaded = True


# super(), object's own attribute methods and instance dicts live in super_calls.py;
# re-exported for existing imports.
# Context managers live in contexts.py; re-exported for existing imports.
from .contexts import (  # noqa: E402
    AutocastClassVar,
    AutocastVar,
    GradModeVar,
    _CtxMethod,
    grad_mode_clone,
)
from .super_calls import (  # noqa: E402
    _PLAIN_OBJECT_METHODS,
    SuperVar,
    _instance_dict,
    _NoOp,
    _PlainAttrFn,
)

__all__ = [
    "SuperVar",
    "_NoOp",
    "_PLAIN_OBJECT_METHODS",
    "_PlainAttrFn",
    "_instance_dict",
    "AutocastClassVar",
    "AutocastVar",
    "GradModeVar",
    "_CtxMethod",
    "grad_mode_clone",
]


def _hooks_reason(cls) -> str:
    """Why a module call with hooks breaks the graph, in the user's terms."""
    if any(c.__name__ == "FSDPModule" for c in cls.__mro__):
        return (
            f"module hooks on {cls.__name__}: FSDP2's pre/post-forward hooks (all-gather, "
            "reshard) run eagerly; the module's forward is captured on its own"
        )
    return f"module hooks on {cls.__name__}"
