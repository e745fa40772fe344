"""Tensors in the graph: attribute reads, methods, operators."""

from __future__ import annotations

import operator

import torch

from ..exc import Unsupported
from .base import ConstVar, Var
from .symbolic import is_symbolic, wrap_symbolic

# Metadata the trace specialises on (guarded by the inputs' TENSOR_MATCH guards).
CONST_ATTRS = {
    "shape",
    "dtype",
    "device",
    "ndim",
    "is_cuda",
    "is_cpu",
    "is_meta",
    "layout",
    "requires_grad",
    "is_leaf",
    "is_sparse",
    "is_quantized",
    "is_nested",
    "is_mps",
}
# Views/derived tensors read as attributes.
TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
# Methods that read data, touch storage or autograd internals: always a graph break.
DATA_METHODS = {
    "item",
    "tolist",
    "numpy",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__len__",
    "data_ptr",
    "untyped_storage",
    "storage",
    "equal",
    "allclose",
    "is_nonzero",
    "backward",
    "register_hook",
    "retain_grad",
    "__array__",
    "__repr__",
    "__str__",
    "__format__",
    "nonzero",
    "record_stream",
    "share_memory_",
    "pin_memory",
    "set_",
    "resize_",
    "resize_as_",
}
# Methods answered from metadata.
META_METHODS = {
    "size",
    "dim",
    "numel",
    "stride",
    "is_contiguous",
    "is_floating_point",
    "is_complex",
    "element_size",
    "get_device",
    "nelement",
    "ndimension",
    "storage_offset",
    "type",
}


class TensorVar(Var):
    def __init__(self, node, example, device, source=None):
        self.node = node
        self.example = example
        self.device = device
        self.source = source
        node.meta["val"] = example

    is_param = False

    def python_type(self):
        return torch.nn.Parameter if self.is_param else torch.Tensor

    def truth(self, tx):
        raise Unsupported("data-dependent control flow: truth value of a tensor")

    def getattr(self, tx, name):
        ex = self.example
        if name == "device":
            return ConstVar(self.device)
        if name == "is_cuda":
            return ConstVar(self.device.type == "cuda")
        if name == "is_cpu":
            return ConstVar(self.device.type == "cpu")
        if name == "is_meta":
            return ConstVar(self.device.type == "meta")
        if name == "shape":
            return tx.output.shape_var(self)
        if name == "is_leaf" and self.source is not None:
            return ConstVar(_input_fact(tx.output, self, "is_leaf", lambda t: t.is_leaf))
        if name in CONST_ATTRS:
            return ConstVar(getattr(ex, name))
        if name in TENSOR_ATTRS:
            return tx.output.call_op("call_function", getattr, [self, ConstVar(name)], {})
        if name in ("data", "grad", "grad_fn", "_base", "_version"):
            raise Unsupported(f"Tensor.{name}")
        attr = getattr(torch.Tensor, name, None)
        if attr is None:
            raise Unsupported(f"unknown Tensor attribute {name!r}")
        if callable(attr):
            return TensorMethodVar(self, name)
        raise Unsupported(f"Tensor attribute {name!r}")

    def setattr(self, tx, name, value):
        # requires_grad turned on inside a graph: a backend that traces the graph as one
        # autograd function cannot hand back a new leaf that requires grad; it runs eagerly
        if name == "requires_grad" and value.is_const() and not value.const():
            self.example.requires_grad = False
            tx.output.call_op("call_method", "requires_grad_", [self, value], {}, ret_self=True)
            return
        raise Unsupported(f"setting Tensor.{name}")

    def unpack(self, tx):
        if self.example.dim() == 0:
            raise Unsupported("iterating over a 0-d tensor")
        return [
            tx.output.call_op("call_function", operator.getitem, [self, ConstVar(i)], {})
            for i in range(self.example.shape[0])
        ]

    def call_method(self, tx, name, args, kwargs):
        return tensor_method(tx, self, name, args, kwargs)

    def reconstruct(self, cg):
        return cg.graph_output(self)

    def __repr__(self):
        return f"Tensor({self.node.name}, {tuple(self.example.shape)}, {self.example.dtype})"


class TensorMethodVar(Var):
    def __init__(self, tensor: TensorVar, name: str):
        self.tensor = tensor
        self.name = name

    def call(self, tx, args, kwargs):
        return tensor_method(tx, self.tensor, self.name, args, kwargs)

    def reconstruct(self, cg):
        t = cg.rebuild(self.tensor)
        name = self.name
        return lambda ctx: getattr(t(ctx), name)

    def __repr__(self):
        return f"TensorMethod({self.name})"


def _input_fact(out, t: TensorVar, expr: str, read):
    """A fact about an input tensor that its fake does not carry (a fake is a leaf, not an
    inference tensor, not a view): read from the real input and guarded."""
    src = t.source.expr
    value = out.real_input(src)
    if value is None:
        raise Unsupported(f"Tensor.{expr} of {src}, which is not a graph input")
    fact = read(value)
    out.guards.add("TENSOR_FACT", src, f"{src}.{expr} is {fact!r}")
    return fact


def _guard_storage_offsets(out, t: TensorVar) -> None:
    """Reading a storage offset bakes it into the trace: guard it. A tensor the graph made
    (a view of some input) has an offset that follows its base's, so then every tensor input
    of the graph gets the guard (rare, and always correct)."""
    if t.source is not None:  # the value the trace read: the fake's, made from the input
        out.guards.storage_offset(t.source.expr, t.example)
        return
    for source, value in zip(out.input_sources, out.input_values):
        if isinstance(value, torch.Tensor):
            out.guards.storage_offset(source.expr, value)


def tensor_method(tx, t: TensorVar, name, args, kwargs):
    if name == "requires_grad_":
        flag = args[0] if args else kwargs.get("requires_grad", ConstVar(True))
        if not (flag.is_const() and not flag.const()):
            raise Unsupported("Tensor.requires_grad_() (makes a new leaf; runs eagerly)")
    if name in ("is_inference", "_is_view") and t.source is not None and not args and not kwargs:
        read = lambda x: getattr(x, name)()  # noqa: E731
        return ConstVar(_input_fact(tx.output, t, f"{name}()", read))
    if name == "numpy" and not args and not (kwargs and kwargs.get("force", ConstVar(0)).const()):
        from .numpy_arrays import tensor_to_array

        return tensor_to_array(tx, t)
    if name in DATA_METHODS:
        raise Unsupported(f"Tensor.{name}() reads tensor data")
    if name in META_METHODS:
        if not all(a.is_const() for a in args) or not all(v.is_const() for v in kwargs.values()):
            raise Unsupported(f"Tensor.{name} with non-constant arguments")
        if name == "type":
            return _tensor_type(tx, t, args, kwargs)
        if name == "get_device":
            return ConstVar(-1 if t.device.type == "cpu" else t.device.index)
        if name == "storage_offset" and t.example._has_symbolic_sizes_strides:
            # a symbolic input's fake starts at offset 0 whatever the real tensor's offset
            raise Unsupported("Tensor.storage_offset() of a tensor with symbolic sizes")
        if name == "storage_offset":
            _guard_storage_offsets(tx.output, t)
        const_args = [a.const() for a in args]
        const_kwargs = {k: v.const() for k, v in kwargs.items()}
        v = getattr(t.example, name)(*const_args, **const_kwargs)
        if is_symbolic(v):  # dynamic shapes: the graph computes it (``symbolic.py``)
            if name == "size" and not const_kwargs:
                if const_args:
                    return tx.output.size_var(t, const_args[0])
                return tx.output.shape_var(t)
            if name == "is_contiguous":
                raise Unsupported(f"Tensor.{name}() of a tensor with symbolic sizes")
            node = tx.output.graph.create_node(
                "call_method", name, (t.node, *const_args), const_kwargs
            )
            return wrap_symbolic(tx.output, node, v)
        return tx.output.wrap_const(v)
    if name in ("cpu",) and t.device.type == "cpu":
        return t
    if name == "__setitem__":
        tx.output.call_op("call_function", operator.setitem, [t, *args], kwargs, ret_self=True)
        return ConstVar(None)
    inplace = name.endswith("_") and not name.endswith("__")
    return tx.output.call_op("call_method", name, [t, *args], kwargs, ret_self=inplace)


def _type_string(dtype, device) -> str:
    """``Tensor.type()`` as eager answers it for a tensor of ``dtype`` on ``device``."""
    name = torch.empty(0, dtype=dtype).type()  # "torch.FloatTensor"
    if device.type == "cpu":
        return name
    if device.type == "cuda":
        return name.replace("torch.", "torch.cuda.", 1)
    raise Unsupported(f"Tensor.type() of a tensor on {device}")


def _tensor_type(tx, t: TensorVar, args, kwargs):
    """``t.type()``: the type string of the real device (the fake is a meta tensor);
    ``t.type(dtype | "torch.HalfTensor" | torch.HalfTensor)``: a dtype conversion, traced as
    ``t.to(dtype)`` (same result, the same tensor when the dtype is already right)."""
    kw = {k: v.const() for k, v in kwargs.items()}
    target = args[0].const() if args else kw.pop("dtype", None)
    kw.pop("non_blocking", None)
    if kw or len(args) > 2:
        raise Unsupported(f"Tensor.type with arguments {sorted(kw)}")
    if target is None:
        return ConstVar(_type_string(t.example.dtype, t.device))
    if isinstance(target, torch.dtype):
        dtype, on_cuda = target, t.device.type == "cuda"
    else:
        cls = target
        if isinstance(target, str):
            cls = torch
            for part in target.split(".")[1:] if target.startswith("torch.") else ["?"]:
                cls = getattr(cls, part, None)
            if not isinstance(cls, type) or not hasattr(cls, "is_cuda"):
                raise Unsupported(f"ValueError: invalid type: {target!r}")
        if not isinstance(cls, type) or not isinstance(getattr(cls, "dtype", None), torch.dtype):
            raise Unsupported(f"Tensor.type({target!r})")
        dtype, on_cuda = cls.dtype, bool(cls.is_cuda)
        if on_cuda != (t.device.type == "cuda") or t.device.type not in ("cpu", "cuda"):
            raise Unsupported(f"Tensor.type({target!r}) moves the tensor to another device")
    if dtype == t.example.dtype:
        return t  # eager returns the tensor itself
    return tx.output.call_op("call_method", "to", [t, ConstVar(dtype)], {})
