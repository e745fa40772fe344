"""NumPy arrays made from tensors, traced as tensors.

``t.numpy()`` on a CPU tensor gives an array that shares the tensor's memory; NumPy code on it
(ufuncs, reductions, reshapes, operators, indexing) and the way back (``torch.from_numpy``,
``torch.as_tensor``, ``torch.tensor``) are recorded here as torch operations on that tensor,
so the program stays one graph. An ``NDArrayVar`` holds the tensor that has the array's
values; writes through the array (``a[i] = v``, ``a += 1``) are writes to that tensor, as the
shared memory makes them in eager.

NumPy's own rules decide every result's dtype and shape: the function runs once at trace time
on uninitialised arrays of the operands' shapes and dtypes (values are never read), and the
torch computation is cast to what NumPy returned (``np.exp`` of an int array is float64,
``int32 + float32`` is float64, a Python float does not widen a float32 array). A reduction over
every axis returns a NumPy scalar in eager; here it is a 0-d array marked ``scalar``, rebuilt as
a scalar if it leaves the graph. What is not modelled (array inputs from outside the frame,
data-dependent functions such as ``np.nonzero``, ``float(array)``) is a graph break.
"""

from __future__ import annotations

import operator

import torch

from ..exc import Unsupported
from .base import ConstVar, Var
from .tensor import TensorVar


def _np():
    import numpy

    return numpy


def is_numpy_callable(value) -> bool:
    """A function of NumPy's top-level namespace or a ufunc (numpy is looked up, never
    imported here). ``numpy.random`` and other submodules are not: their functions are not
    pure, and calls of them stay graph breaks."""
    import sys

    np = sys.modules.get("numpy")
    if np is None or isinstance(value, type):
        return False
    return isinstance(value, np.ufunc) or (
        callable(value) and getattr(value, "__module__", None) == "numpy"
    )


def numpy_dtype_of(dtype: torch.dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def torch_dtype_of(np_dtype) -> torch.dtype:
    np = _np()
    return torch.from_numpy(np.empty(0, dtype=np.dtype(np_dtype))).dtype


class NDArrayVar(Var):
    """An array with the values of ``tensor`` (a TensorVar in the graph)."""

    def __init__(self, tensor: TensorVar, scalar: bool = False):
        self.tensor = tensor
        self.scalar = scalar  # a NumPy scalar in eager (a full reduction, an int index)

    def python_type(self):
        np = _np()
        return numpy_dtype_of(self.tensor.example.dtype).type if self.scalar else np.ndarray

    def truth(self, tx):
        raise Unsupported("data-dependent control flow: truth value of a NumPy array")

    def dummy(self):
        """An uninitialised NumPy value of this array's shape and dtype."""
        ex = self.tensor.example
        if ex._has_symbolic_sizes_strides:
            raise Unsupported("NumPy arrays with symbolic sizes")
        np = _np()
        arr = np.empty(tuple(ex.shape), dtype=numpy_dtype_of(ex.dtype))
        return arr[()] if self.scalar else arr

    def getattr(self, tx, name):
        ex = self.tensor.example
        if name == "shape":
            return ConstVar(tuple(ex.shape))
        if name == "ndim":
            return ConstVar(ex.dim())
        if name == "size":
            return ConstVar(ex.numel())
        if name == "dtype":
            return ConstVar(numpy_dtype_of(ex.dtype))
        if name == "itemsize":
            return ConstVar(ex.element_size())
        if name == "T":
            return numpy_call(tx, _np().transpose, [self], {})
        if name in _METHODS:
            return NDArrayMethodVar(self, name)
        raise Unsupported(f"ndarray attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        return array_method(tx, self, name, args, kwargs)

    def unpack(self, tx):
        ex = self.tensor.example
        if ex.dim() == 0:
            raise Unsupported("iterating over a 0-d array")
        return [self.call_method(tx, "__getitem__", [ConstVar(i)], {}) for i in range(ex.shape[0])]

    def reconstruct(self, cg):
        t = cg.rebuild(self.tensor)
        if self.scalar:
            return lambda ctx: t(ctx).detach().numpy()[()]
        return lambda ctx: t(ctx).detach().numpy()

    def __repr__(self):
        return f"NDArray({self.tensor!r}{', scalar' if self.scalar else ''})"


class NDArrayMethodVar(Var):
    def __init__(self, array: NDArrayVar, name: str):
        self.array, self.name = array, name

    def call(self, tx, args, kwargs):
        return array_method(tx, self.array, self.name, args, kwargs)


class NumpyFnVar(Var):
    """A NumPy function or ufunc (``np.exp``, ``np.sum``, ...)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return type(self.fn)

    def is_const(self):
        return True

    def const(self):
        return self.fn

    def call(self, tx, args, kwargs):
        return numpy_call(tx, self.fn, args, kwargs)

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.fn)

    def __repr__(self):
        return f"NumpyFn({getattr(self.fn, '__name__', self.fn)})"


class NumpyScalarTypeVar(Var):
    """``np.float32``, ``np.int64``, ...: a call on constants is a constant NumPy scalar."""

    def __init__(self, cls, source=None):
        self.cls = cls
        self.source = source

    def python_type(self):
        return type

    def is_const(self):
        return True

    def const(self):
        return self.cls

    def call(self, tx, args, kwargs):
        if all(isinstance(a, Var) and a.is_const() for a in [*args, *kwargs.values()]):
            consts = {k: v.const() for k, v in kwargs.items()}
            return ConstVar(self.cls(*[a.const() for a in args], **consts))
        if len(args) == 1 and not kwargs and isinstance(args[0], NDArrayVar):
            return array_method(tx, args[0], "astype", [ConstVar(self.cls)], {})
        raise Unsupported(f"np.{self.cls.__name__}() of values only known symbolically")

    def reconstruct(self, cg):
        return self.reconstruct_held(cg, self.cls)


def is_numpy_scalar_type(value) -> bool:
    import sys

    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, type) and issubclass(value, np.generic)


# ------------------------------------------------------------------ between torch and numpy


def tensor_to_array(tx, t: TensorVar) -> NDArrayVar:
    """``t.numpy()``: the same memory, so the same tensor."""
    if t.device.type != "cpu":
        raise Unsupported("Tensor.numpy() of a tensor that is not on the CPU")
    if t.example.requires_grad:
        raise Unsupported("Tensor.numpy() of a tensor that requires grad")
    return NDArrayVar(t)


def torch_from_array(tx, fn, args, kwargs) -> Var:
    """``torch.from_numpy(a)``, ``torch.as_tensor(a)``, ``torch.tensor(a)``: a tensor with the
    array's values (a view for the sharing ones, a copy for ``torch.tensor``)."""
    a = args[0]
    dtype = kwargs.get("dtype")
    extra = {k for k in kwargs if k not in ("dtype", "device")}
    if len(args) != 1 or extra or not isinstance(a, NDArrayVar):
        raise Unsupported(f"{fn.__name__} of a NumPy array with these arguments")
    device = kwargs.get("device")
    if device is not None and not (
        device.is_const() and torch.device(device.const()).type == "cpu"
    ):
        raise Unsupported(f"{fn.__name__} of a NumPy array onto another device")
    out = tx.output
    t = a.tensor
    if fn is torch.tensor:
        t = out.call_op("call_method", "clone", [t], {})
    else:
        t = out.call_op("call_method", "view_as", [t, t], {})  # shares memory, another object
    if dtype is not None and not (dtype.is_const() and dtype.const() in (None, t.example.dtype)):
        t = out.call_op("call_method", "to", [t, dtype], {})
    return t


_FROM_DATA = (torch.from_numpy, torch.as_tensor, torch.tensor, torch.asarray)


def torch_call_with_arrays(tx, fn, args, kwargs):
    """A torch function called with NumPy arrays among its arguments, or None."""
    if (
        fn in _FROM_DATA
        and args
        and "dtype" not in kwargs
        and isinstance(args[0], ConstVar)
        and type(args[0].value).__module__ == "numpy"
        and hasattr(args[0].value, "dtype")
    ):
        # torch.tensor(np.float64(x)) keeps NumPy's dtype (a Python float would not)
        dtype = ConstVar(torch_dtype_of(args[0].value.dtype))
        return tx.output.call_op("call_function", fn, list(args), {**kwargs, "dtype": dtype})
    if not any(isinstance(a, NDArrayVar) for a in [*args, *kwargs.values()]):
        return None
    if fn in (torch.from_numpy, torch.as_tensor, torch.tensor, torch.asarray):
        return torch_from_array(tx, fn, args, kwargs)
    raise Unsupported(f"torch function {getattr(fn, '__name__', fn)} with a NumPy array argument")


# ------------------------------------------------------------------ numpy's rules, torch's ops


def _oracle(fn, args, kwargs):
    """What NumPy returns for these operands' shapes and dtypes (values never read)."""
    np = _np()

    def dummy(v):
        if isinstance(v, NDArrayVar):
            return v.dummy()
        if isinstance(v, Var):
            if isinstance(v, TensorVar):
                raise Unsupported("a NumPy function with a tensor argument")
            items = getattr(v, "items", None)
            if isinstance(items, list):  # a list or tuple of arrays / constants
                return [dummy(x) for x in items]
            return v.const()
        return v

    with np.errstate(all="ignore"):
        try:
            return fn(*[dummy(a) for a in args], **{k: dummy(v) for k, v in kwargs.items()})
        except Exception as e:
            raise Unsupported(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {e}") from e


class _Ops:
    """Records torch ops on TensorVars (``tx.output.call_op``)."""

    def __init__(self, tx):
        self.out = tx.output

    def fn(self, f, *args, **kwargs):
        return self.out.call_op("call_function", f, list(args), kwargs)

    def method(self, t, name, *args, **kwargs):
        return self.out.call_op("call_method", name, [t, *args], kwargs)

    def cast(self, v, dtype):
        if isinstance(v, TensorVar) and v.example.dtype != dtype:
            return self.method(v, "to", ConstVar(dtype))
        return v


def _operand(v):
    """A tensor for an array, the value itself for a constant."""
    if isinstance(v, NDArrayVar):
        return v.tensor
    if isinstance(v, Var) and v.is_const():
        c = v.const()
        if isinstance(c, (bool, int, float)) or type(c).__module__ == "numpy":
            return ConstVar(c.item() if hasattr(c, "item") and type(c).__module__ == "numpy" else c)
    if isinstance(v, Var):
        raise Unsupported(f"NumPy operand {v}")
    return ConstVar(v)


def _wrap(ops, t: TensorVar, meta) -> NDArrayVar:
    """``t`` as NumPy's result ``meta`` (an ndarray or a NumPy scalar): cast to its dtype."""
    np = _np()
    scalar = not isinstance(meta, np.ndarray)
    t = ops.cast(t, torch_dtype_of(np.asarray(meta).dtype))
    if tuple(t.example.shape) != np.shape(meta):
        raise Unsupported(f"NumPy result shape {np.shape(meta)} not modelled here")
    return NDArrayVar(t, scalar=scalar)


def _axis(kwargs, args, pos):
    a = kwargs.get("axis", args[pos] if len(args) > pos else None)
    if a is None:
        return None
    a = a.const() if isinstance(a, Var) else a
    return tuple(a) if isinstance(a, (list, tuple)) else a


def _flag(kwargs, name, default=False):
    v = kwargs.get(name)
    return default if v is None else bool(v.const())


def _unary(torch_fn):
    def impl(tx, ops, meta, args, kwargs):
        if len(args) != 1 or set(kwargs) - {"dtype"}:
            raise Unsupported("ufunc arguments not modelled (out=, where=, ...)")
        x = ops.cast(_operand(args[0]), _result_float(meta))
        return ops.fn(torch_fn, x)

    return impl


def _result_float(meta) -> torch.dtype:
    """The dtype to compute in: NumPy's result dtype when it is floating, else unchanged."""
    np = _np()
    dt = np.asarray(meta).dtype
    return torch_dtype_of(dt) if dt.kind == "f" else None


def _binary(torch_fn, compare=False):
    def impl(tx, ops, meta, args, kwargs):
        if len(args) != 2 or kwargs:
            raise Unsupported("ufunc arguments not modelled (out=, where=, ...)")
        np = _np()
        a, b = (_operand(v) for v in args)
        if compare:  # compare in the operands' common type
            common = np.result_type(*[_oracle_dtype(v) for v in args])
            dtype = torch_dtype_of(common)
        else:
            dtype = torch_dtype_of(np.asarray(meta).dtype)
        # scalars as 0-d tensors of the computing dtype (torch's binary functions do not all
        # take a number on either side); the result's dtype is NumPy's, set by the cast
        a, b = (
            ops.cast(v, dtype)
            if isinstance(v, TensorVar)
            else ops.fn(torch.full, ConstVar(()), v, dtype=ConstVar(dtype))
            for v in (a, b)
        )
        return ops.fn(torch_fn, a, b)

    return impl


def _oracle_dtype(v):
    d = v.dummy() if isinstance(v, NDArrayVar) else _operand(v).const()
    return d.dtype if hasattr(d, "dtype") else d


def _reduction(name):
    def impl(tx, ops, meta, args, kwargs):
        allowed = {"axis", "keepdims", "dtype", "ddof"}
        if set(kwargs) - allowed or len(args) > 2:
            raise Unsupported(f"np.{name} arguments not modelled")
        x = _operand(args[0])
        axis = _axis(kwargs, args, 1)
        keep = _flag(kwargs, "keepdims")
        work = _result_float(meta)
        if work is not None:
            x = ops.cast(x, work)
        every = tuple(range(x.example.dim()))  # axis=None: every axis, named
        dim = {"dim": ConstVar(every if axis is None else axis)}
        if name in ("sum", "mean", "amax", "amin"):
            return ops.fn(getattr(torch, name), x, **dim, keepdim=ConstVar(keep))
        if name in ("any", "all"):
            if axis is None:
                r = ops.fn(getattr(torch, name), x)
                return ops.method(r, "reshape", ConstVar((1,) * len(every))) if keep else r
            if isinstance(axis, tuple):
                raise Unsupported(f"np.{name} over several axes")
            return ops.fn(getattr(torch, name), x, **dim, keepdim=ConstVar(keep))
        if name in ("std", "var"):
            ddof = kwargs.get("ddof")
            corr = ConstVar(ddof.const() if ddof is not None else 0)
            return ops.fn(getattr(torch, name), x, **dim, correction=corr, keepdim=ConstVar(keep))
        if name in ("argmax", "argmin", "prod"):
            if isinstance(axis, tuple):
                raise Unsupported(f"np.{name} over several axes")
            if axis is None:
                x, axis = ops.method(x, "reshape", ConstVar(-1)), 0
                if name != "prod":
                    r = ops.fn(getattr(torch, name), x, dim=ConstVar(0))
                    if keep:
                        r = ops.method(r, "reshape", ConstVar((1,) * args[0].tensor.example.dim()))
                    return r
            return ops.fn(getattr(torch, name), x, dim=ConstVar(axis), keepdim=ConstVar(keep))
        if name in ("cumsum", "cumprod"):
            if axis is None:
                x, axis = ops.method(x, "reshape", ConstVar(-1)), 0
            return ops.fn(getattr(torch, name), x, dim=ConstVar(axis))
        raise Unsupported(f"np.{name}")

    return impl


def _consts(args):
    return [a.const() if isinstance(a, Var) else a for a in args]


def _shape_op(name):
    def impl(tx, ops, meta, args, kwargs):
        x = _operand(args[0])
        rest = _consts(args[1:])
        kw = {k: v.const() for k, v in kwargs.items()}
        if name == "reshape":
            if kw.get("order", "C") != "C":
                raise Unsupported("np.reshape with order other than 'C'")
            return ops.method(x, "reshape", ConstVar(meta.shape))
        if name == "transpose":
            axes = kw.get("axes", rest[0] if rest else None)
            axes = tuple(reversed(range(x.example.dim()))) if axes is None else tuple(axes)
            return ops.method(x, "permute", ConstVar(axes))
        if name == "swapaxes":
            return ops.method(x, "transpose", ConstVar(rest[0]), ConstVar(rest[1]))
        if name == "expand_dims":
            return ops.method(x, "reshape", ConstVar(meta.shape))
        if name == "squeeze":
            return ops.method(x, "reshape", ConstVar(meta.shape))
        if name in ("ravel", "flatten"):
            return ops.method(ops.method(x, "reshape", ConstVar(-1)), "clone")
        if name == "copy":
            return ops.method(x, "clone")
        if name == "clip":
            lo = kw.get("a_min", rest[0] if rest else None)
            hi = kw.get("a_max", rest[1] if len(rest) > 1 else None)
            x = ops.cast(x, torch_dtype_of(meta.dtype))
            return ops.fn(torch.clamp, x, ConstVar(lo), ConstVar(hi))
        raise Unsupported(f"np.{name}")

    return impl


def _join(name):
    def impl(tx, ops, meta, args, kwargs):
        seq = args[0]
        items = getattr(seq, "items", None)
        if not isinstance(items, list) or not items:
            raise Unsupported(f"np.{name} of {seq}")
        dtype = torch_dtype_of(meta.dtype)
        tensors = [ops.cast(_operand(v), dtype) for v in items]
        if not all(isinstance(t, TensorVar) for t in tensors):
            raise Unsupported(f"np.{name} of scalars")
        axis = _axis(kwargs, args, 1)
        axis = 0 if axis is None and "axis" not in kwargs else axis
        from .containers import ListVar

        if name == "concatenate":
            if axis is None:
                tensors = [ops.method(t, "reshape", ConstVar(-1)) for t in tensors]
                axis = 0
            return ops.fn(torch.cat, ListVar(tensors), dim=ConstVar(axis))
        return ops.fn(torch.stack, ListVar(tensors), dim=ConstVar(axis))

    return impl


def _where(tx, ops, meta, args, kwargs):
    if len(args) != 3 or kwargs:
        raise Unsupported("np.where with one argument (data-dependent size)")
    dtype = torch_dtype_of(meta.dtype)
    cond = ops.cast(_operand(args[0]), torch.bool)
    a, b = (ops.cast(_operand(v), dtype) for v in args[1:])
    return ops.fn(torch.where, cond, a, b)


def _matmul(tx, ops, meta, args, kwargs):
    if len(args) != 2 or kwargs:
        raise Unsupported("np.matmul arguments not modelled")
    dtype = torch_dtype_of(meta.dtype)
    a, b = (ops.cast(_operand(v), dtype) for v in args)
    if not (isinstance(a, TensorVar) and isinstance(b, TensorVar)):
        raise Unsupported("np.matmul of scalars")
    return ops.fn(torch.matmul, a, b)


def _like(fill):
    def impl(tx, ops, meta, args, kwargs):
        value = fill if fill is not None else _consts([args[1]])[0]
        return ops.fn(
            torch.full,
            ConstVar(meta.shape),
            ConstVar(value),
            dtype=ConstVar(torch_dtype_of(meta.dtype)),
        )

    return impl


_IMPLS = None


def _impls() -> dict:
    global _IMPLS
    if _IMPLS is None:
        np = _np()
        unary = {
            "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log,
            "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
            "square": torch.square, "absolute": torch.abs, "negative": torch.neg,
            "positive": torch.positive, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
            "arcsin": torch.asin, "arccos": torch.acos, "arctan": torch.atan, "sinh": torch.sinh,
            "cosh": torch.cosh, "tanh": torch.tanh, "floor": torch.floor, "ceil": torch.ceil,
            "trunc": torch.trunc, "rint": torch.round, "sign": torch.sign, "isnan": torch.isnan,
            "isinf": torch.isinf, "isfinite": torch.isfinite, "logical_not": torch.logical_not,
            "signbit": torch.signbit,
        }  # fmt: skip
        binary = {
            "add": torch.add, "subtract": torch.sub, "multiply": torch.mul,
            "divide": torch.true_divide, "true_divide": torch.true_divide,
            "floor_divide": torch.floor_divide, "power": torch.pow, "remainder": torch.remainder,
            "mod": torch.remainder, "fmod": torch.fmod, "maximum": torch.maximum,
            "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
            "arctan2": torch.atan2, "hypot": torch.hypot, "logical_and": torch.logical_and,
            "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
            "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
            "bitwise_xor": torch.bitwise_xor,
        }  # fmt: skip
        compare = {
            "greater": torch.gt, "greater_equal": torch.ge, "less": torch.lt,
            "less_equal": torch.le, "equal": torch.eq, "not_equal": torch.ne,
        }  # fmt: skip
        impls = {}
        for n, f in unary.items():
            impls[getattr(np, n)] = _unary(f)
        impls[np.abs] = _unary(torch.abs)
        for n, f in binary.items():
            impls[getattr(np, n)] = _binary(f)
        for n, f in compare.items():
            impls[getattr(np, n)] = _binary(f, compare=True)
        for n in ("sum", "mean", "std", "var", "argmax", "argmin", "prod", "cumsum", "cumprod"):
            impls[getattr(np, n)] = _reduction(n)
        for n in ("any", "all"):
            impls[getattr(np, n)] = _reduction(n)
        for n in ("max", "amax"):
            impls[getattr(np, n)] = _reduction("amax")
        for n in ("min", "amin"):
            impls[getattr(np, n)] = _reduction("amin")
        for n in (
            "reshape",
            "transpose",
            "swapaxes",
            "expand_dims",
            "squeeze",
            "ravel",
            "copy",
            "clip",
        ):
            impls[getattr(np, n)] = _shape_op(n)
        impls[np.concatenate] = _join("concatenate")
        impls[np.stack] = _join("stack")
        impls[np.where] = _where
        impls[np.matmul] = _matmul
        impls[np.dot] = _matmul
        impls[np.zeros_like] = _like(0)
        impls[np.ones_like] = _like(1)
        impls[np.full_like] = _like(None)
        _IMPLS = impls
    return _IMPLS


def numpy_call(tx, fn, args, kwargs) -> Var:
    """``fn(*args, **kwargs)`` with NumPy's semantics, recorded as torch ops."""
    impl = _impls().get(fn)
    if impl is None:
        raise Unsupported(f"NumPy function {getattr(fn, '__name__', fn)} is not modelled")
    if fn is _np().dot and any(
        isinstance(a, NDArrayVar) and a.tensor.example.dim() > 2 for a in args
    ):
        raise Unsupported("np.dot of arrays with more than 2 dims")
    if not any(isinstance(a, NDArrayVar) for a in [*args, *_flat_items(args)]):
        if all(isinstance(a, Var) and a.is_const() for a in [*args, *kwargs.values()]):
            return tx.output.wrap_const(
                fn(*_consts(args), **{k: v.const() for k, v in kwargs.items()})
            )
        raise Unsupported(f"NumPy function {fn.__name__} without an array argument")
    meta = _oracle(fn, args, kwargs)
    ops = _Ops(tx)
    out = impl(tx, ops, meta, args, kwargs)
    return _wrap(ops, out, meta)


def _flat_items(args):
    out = []
    for a in args:
        items = getattr(a, "items", None)
        if isinstance(items, list):
            out += items
    return out


# ------------------------------------------------------------------ array methods, operators

_METHODS = {
    "sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin", "any", "all",
    "cumsum", "cumprod", "reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten",
    "copy", "clip", "astype", "dot", "__getitem__", "__setitem__",
}  # fmt: skip


def array_method(tx, a: NDArrayVar, name, args, kwargs):
    np = _np()
    if name == "__getitem__":
        (idx,) = args
        t = tx.output.call_op("call_function", operator.getitem, [a.tensor, _index(idx)], {})
        meta = a.dummy()[_index_const(idx)]
        return NDArrayVar(t, scalar=not isinstance(meta, np.ndarray))
    if name == "__setitem__":
        idx, val = args
        v = _operand(val)
        if isinstance(v, TensorVar):
            v = _Ops(tx).cast(v, a.tensor.example.dtype)
        tx.output.call_op(
            "call_function", operator.setitem, [a.tensor, _index(idx), v], {}, ret_self=True
        )
        return ConstVar(None)
    if name == "astype":
        dtype = args[0].const() if args else kwargs["dtype"].const()
        t = tx.output.call_op("call_method", "to", [a.tensor, ConstVar(torch_dtype_of(dtype))], {})
        if t is a.tensor:
            t = tx.output.call_op("call_method", "clone", [t], {})
        return NDArrayVar(t, scalar=a.scalar)
    if name in ("reshape", "transpose") and len(args) > 1:
        args = [a, ConstVar(tuple(_consts(args)))]  # arr.reshape(2, 3) as np.reshape(arr, (2, 3))
    else:
        args = [a, *args]
    fn = {"max": np.amax, "min": np.amin, "flatten": np.ravel}.get(name) or getattr(np, name)
    return numpy_call(tx, fn, args, kwargs)


def _index(idx: Var) -> Var:
    if isinstance(idx, NDArrayVar):
        return idx.tensor
    return idx


def _index_const(idx: Var):
    """The index as NumPy takes it, to learn the result's kind (an index array: zeros, which
    are in range; a boolean mask never gets here, its result size depends on the data)."""
    if isinstance(idx, NDArrayVar):
        return _np().zeros(tuple(idx.tensor.example.shape), dtype="int64")
    if idx.is_const():
        return idx.const()
    raise Unsupported(f"NumPy index {idx}")


_OPERATOR_UFUNC = {
    operator.add: "add", operator.sub: "subtract", operator.mul: "multiply",
    operator.truediv: "true_divide", operator.floordiv: "floor_divide", operator.mod: "remainder",
    operator.pow: "power", operator.matmul: "matmul", operator.lt: "less", operator.le: "less_equal",
    operator.gt: "greater", operator.ge: "greater_equal", operator.eq: "equal",
    operator.ne: "not_equal", operator.and_: "bitwise_and", operator.or_: "bitwise_or",
    operator.xor: "bitwise_xor",
}  # fmt: skip
_INPLACE = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow,
}  # fmt: skip


def array_binary(tx, op, a: Var, b: Var) -> Var:
    """``a <op> b`` where one side is an NDArrayVar."""
    np = _np()
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        raise Unsupported("an operator between a NumPy array and a tensor")
    if op in _INPLACE:
        result = array_binary(tx, _INPLACE[op], a, b)
        if not isinstance(a, NDArrayVar):
            return result
        src = _Ops(tx).cast(result.tensor, a.tensor.example.dtype)
        tx.output.call_op("call_method", "copy_", [a.tensor, src], {}, ret_self=True)
        return a
    name = _OPERATOR_UFUNC.get(op)
    if name is None:
        raise Unsupported(f"{op.__name__} on a NumPy array")
    return numpy_call(tx, getattr(np, name), [a, b], {})


def array_unary(tx, op, a: NDArrayVar) -> Var:
    np = _np()
    fn = {operator.neg: np.negative, operator.pos: np.positive, operator.abs: np.absolute}.get(op)
    if fn is None:
        raise Unsupported(f"{op.__name__} on a NumPy array")
    return numpy_call(tx, fn, [a], {})
