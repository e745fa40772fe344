"""Callables: user functions (inlined), nested functions made in the trace, bound methods."""

from __future__ import annotations

import inspect
import types

from ..exc import Unsupported
from ..source import Source
from .base import ConstVar, Var, is_const_value
from .containers import DictVar, TupleVar

CO_VARARGS = inspect.CO_VARARGS
CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
CO_GENERATOR = inspect.CO_GENERATOR
CO_COROUTINE = inspect.CO_COROUTINE
CO_ASYNC_GENERATOR = inspect.CO_ASYNC_GENERATOR


def bind_args(code: types.CodeType, name: str, args: list, kwargs: dict, defaults, kwdefaults):
    """Bind Var arguments to the code's parameter slots; defaults are Vars (or a callable
    ``i -> Var`` / ``name -> Var`` for lazily wrapped real defaults)."""
    nargs = code.co_argcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nargs]
    kwonly = names[nargs : nargs + nkw]
    out: dict[str, Var] = {}
    kwargs = dict(kwargs)
    for i, a in enumerate(args[:nargs]):
        out[pos_names[i]] = a
    extra = args[nargs:]
    idx = nargs + nkw
    if code.co_flags & CO_VARARGS:
        out[names[idx]] = TupleVar(list(extra))
        idx += 1
    elif extra:
        raise Unsupported(f"{name}() got too many positional arguments")
    posonly = names[: code.co_posonlyargcount]
    for k in list(kwargs):
        if k in pos_names or k in kwonly:
            if k in out or k in posonly:
                raise Unsupported(f"{name}() got multiple values for {k!r}")
            out[k] = kwargs.pop(k)
    if code.co_flags & CO_VARKEYWORDS:
        out[names[idx]] = DictVar(kwargs)
    elif kwargs:
        raise Unsupported(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")
    ndef = len(defaults) if defaults is not None else 0
    for i, n in enumerate(pos_names):
        if n not in out:
            j = i - (nargs - ndef)
            if j < 0:
                raise Unsupported(f"{name}() missing argument {n!r}")
            out[n] = defaults[j]
    for n in kwonly:
        if n not in out:
            if kwdefaults is None or n not in kwdefaults:
                raise Unsupported(f"{name}() missing keyword argument {n!r}")
            out[n] = kwdefaults[n]
    return out


class _LazyDefaults:
    """Real function defaults, wrapped (with a source for guards) only when used."""

    def __init__(self, tx, values, source: Source | None, attr: str, keyed=False):
        self.tx, self.values, self.source, self.attr, self.keyed = tx, values, source, attr, keyed

    def __len__(self):
        return len(self.values)

    def __contains__(self, k):
        return k in self.values

    def __getitem__(self, i):
        src = self.source.attr(self.attr).item(i) if self.source is not None else None
        return self.tx.output.wrap(self.values[i], src)


def _python_specials():
    """Library Python functions followed by a symbolic model instead of being inlined."""
    global _SPECIALS
    if _SPECIALS is None:
        import contextlib
        import copy

        from .copying import deepcopy_var
        from .generator_ctx import contextmanager_var

        _SPECIALS = {copy.deepcopy: deepcopy_var, contextlib.contextmanager: contextmanager_var}
    return _SPECIALS


_SPECIALS = None


# Function attributes that functools.update_wrapper copies (and code reads for logging).
_FN_ATTRS = ("__name__", "__qualname__", "__module__", "__doc__", "__annotations__")
if hasattr(types.FunctionType, "__type_params__"):
    _FN_ATTRS += ("__type_params__",)


class UserFunctionVar(Var):
    """A real Python function from user code: calls are inlined."""

    def __init__(self, fn: types.FunctionType, source=None, pin=None):
        self.fn = fn
        self.source = source
        # A function from the frame state guarded by its code, not identity (see builder):
        # ``pin()`` adds the identity guard when the trace depends on which object it is.
        self._pin = pin

    def exact(self):
        """The function object, for a decision that depends on its identity."""
        if self._pin is not None:
            self._pin()
            self._pin = None
        return self.fn

    def python_type(self):
        return types.FunctionType

    def getattr(self, tx, name):
        if name == "__code__":
            return ConstVar(self.fn.__code__)
        if name in _FN_ATTRS:
            v = getattr(self.fn, name)
            src = self.source.attr(name) if self.source is not None else None
            if is_const_value(v) and src is not None:
                return tx.output.wrap(v, src)  # guarded: wraps() sets them per object
            return tx.output.wrap(v, src) if src is not None else tx.output.wrap_const(v)
        if name in ("__wrapped__", "__dict__") and hasattr(self.fn, name):
            v = getattr(self.fn, name)
            return tx.output.wrap(v, self.source.attr(name) if self.source else None)
        if name == "__get__":
            return ConstVar(None)
        if name == "__class__":  # type(fn).__name__ in logging helpers (torchvision's)
            return tx.output.wrap(type(self.fn), None)
        raise Unsupported(f"function attribute {name!r}")

    def call(self, tx, args, kwargs):
        fn = self.fn
        special = _python_specials().get(fn)
        if special is not None:
            return special(tx, *args, **kwargs)
        return self._inline(tx, args, kwargs)

    def generator_frame(self, tx, args, kwargs):
        """The generator function's frame, bound and not yet run (``generator_ctx``)."""
        return self._inline(tx, args, kwargs, suspend=True)

    def _inline(self, tx, args, kwargs, suspend=False):
        fn = self.fn
        defaults = _LazyDefaults(tx, fn.__defaults__ or (), self.source, "__defaults__")
        kwdefaults = _LazyDefaults(tx, fn.__kwdefaults__ or {}, self.source, "__kwdefaults__")
        if fn.__closure__ and self.source is None and any(True for _ in fn.__closure__):
            closure_src = None
        else:
            closure_src = self.source.attr("__closure__") if self.source is not None else None
        cells = []
        for i, cell in enumerate(fn.__closure__ or ()):
            src = closure_src.item(i) if closure_src is not None else None
            cells.append(tx.output.real_cell(cell, src))
        return tx.inline_call(
            fn.__code__,
            fn.__globals__,
            cells,
            args,
            kwargs,
            defaults,
            kwdefaults,
            fn.__name__,
            suspend=suspend,
        )

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.fn)

    def __repr__(self):
        return f"UserFunction({self.fn.__qualname__})"


class NestedFunctionVar(Var):
    """A function created by MAKE_FUNCTION inside the traced code. Attributes set on it in the
    trace (``functools.wraps`` copies ``__name__``, ``__doc__``, ``__wrapped__``, ...) are
    kept here and set on the function when it is rebuilt after the graph."""

    def __init__(self, code, globals_, name, defaults, kwdefaults, closure, annotations=None):
        self.code = code
        self.globals = globals_
        self.name = name
        self.defaults = defaults  # list[Var] | None
        self.kwdefaults = kwdefaults  # dict[str, Var] | None
        self.closure = closure  # list[CellVar]
        self.annotations = annotations  # list[Var] (name, value, ...) | None
        self.attrs: dict[str, Var] = {}  # special attributes assigned in the trace
        self.fn_dict: Var | None = None  # its __dict__ (function attributes), made on use

    def python_type(self):
        return types.FunctionType

    def _dict(self):
        if self.fn_dict is None:
            self.fn_dict = DictVar({})
        return self.fn_dict

    def getattr(self, tx, name):
        from .builtins import _AttrMissing

        if name in self.attrs:
            return self.attrs[name]
        if name == "__name__":
            return ConstVar(self.name)
        if name == "__qualname__":
            return ConstVar(getattr(self.code, "co_qualname", self.name))
        if name == "__module__":
            return ConstVar(self.globals.get("__name__"))
        if name == "__doc__":
            return ConstVar(types.FunctionType(self.code, self.globals).__doc__)
        if name == "__type_params__":
            return ConstVar(())
        if name == "__annotations__":
            items = {}
            ann = self.annotations or []
            for k, v in zip(ann[::2], ann[1::2]):
                items[k.const()] = v
            d = self.attrs[name] = DictVar(items)  # one dict object, as eager caches it
            return d
        if name == "__dict__":
            return self._dict()
        if name == "__class__":
            return tx.output.wrap(types.FunctionType, None)
        if name == "__code__":
            return ConstVar(self.code)
        if self.fn_dict is not None and isinstance(self.fn_dict, DictVar):
            if name in self.fn_dict.items:
                return self.fn_dict.items[name]
        if name in dir(types.FunctionType):
            raise Unsupported(f"nested function attribute {name!r}")
        raise _AttrMissing(f"function has no attribute {name!r}")

    def setattr(self, tx, name, value):
        if name in _FN_ATTRS:
            self.attrs[name] = value
        elif name == "__dict__":
            if not isinstance(value, DictVar):
                raise Unsupported("setting __dict__ of a function to a non-dict")
            self.fn_dict = value
        elif name in dir(types.FunctionType):
            raise Unsupported(f"setting attribute {name!r} on a nested function")
        else:
            self._dict().call_method(tx, "__setitem__", [ConstVar(name), value], {})

    def call(self, tx, args, kwargs):
        return self.generator_frame(tx, args, kwargs, suspend=False)

    def generator_frame(self, tx, args, kwargs, suspend=True):
        return tx.inline_call(
            self.code,
            self.globals,
            self.closure,
            args,
            kwargs,
            self.defaults,
            self.kwdefaults,
            self.name,
            suspend=suspend,
        )

    def reconstruct(self, cg):
        cells = [cg.real_cell(c) for c in self.closure]
        defs = [cg.rebuild(d) for d in (self.defaults or [])]
        kwdefs = {k: cg.rebuild(v) for k, v in (self.kwdefaults or {}).items()}
        attrs = {k: cg.rebuild(v) for k, v in self.attrs.items()}
        fn_dict = cg.rebuild(self.fn_dict) if self.fn_dict is not None else None
        replace_dict = self.fn_dict is not None and self.fn_dict.source is not None
        code, g, name = self.code, self.globals, self.name

        def make(ctx):
            f = types.FunctionType(
                code,
                g,
                name,
                tuple(d(ctx) for d in defs) or None,
                tuple(c(ctx) for c in cells) or None,
            )
            if kwdefs:
                f.__kwdefaults__ = {k: v(ctx) for k, v in kwdefs.items()}
            for k, v in attrs.items():
                setattr(f, k, v(ctx))
            if fn_dict is not None:
                if replace_dict:
                    f.__dict__ = fn_dict(ctx)
                else:
                    f.__dict__.update(fn_dict(ctx))
            return f

        return make

    def __repr__(self):
        return f"NestedFunction({self.name})"


class BoundMethodVar(Var):
    """``obj.method`` for a Python-level method: calls inline ``method(obj, ...)``."""

    def __init__(self, fn_var: Var, self_var: Var, source=None):
        self.fn_var = fn_var
        self.self_var = self_var
        self.source = source

    def python_type(self):
        return types.MethodType

    def call(self, tx, args, kwargs):
        return self.fn_var.call(tx, [self.self_var, *args], kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.self_var
        if name == "__func__":
            return self.fn_var
        return self.fn_var.getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.from_source(self.source)
        f = cg.rebuild(self.fn_var)
        s = cg.rebuild(self.self_var)
        return lambda ctx: types.MethodType(f(ctx), s(ctx))

    def __repr__(self):
        return f"BoundMethod({self.fn_var}, {self.self_var})"


class BoundVarMethod(Var):
    """A method of a symbolic container (``lst.append``): dispatches to ``call_method``."""

    def __init__(self, obj: Var, name: str):
        self.obj = obj
        self.name = name

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, cg):
        o = cg.rebuild(self.obj)
        name = self.name
        return lambda ctx: getattr(o(ctx), name)


class ConstMethodVar(Var):
    """A method of a constant (``"a,b".split``, ``(1, 2).index``): folded."""

    def __init__(self, value, name):
        self.value = value
        self.name = name

    def call(self, tx, args, kwargs):
        if not all(a.is_const() for a in args) or not all(v.is_const() for v in kwargs.values()):
            if isinstance(self.value, str) and self.name == "format":
                raise Unsupported("str.format with non-constant arguments")
            raise Unsupported(f"{type(self.value).__name__}.{self.name} on non-constants")
        try:
            r = getattr(self.value, self.name)(
                *[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()}
            )
        except Exception as e:
            raise Unsupported(f"{type(e).__name__} folding {self.name}") from e
        return tx.output.wrap_const(r)

    def reconstruct(self, cg):
        v, name = self.value, self.name
        return lambda ctx: getattr(v, name)
