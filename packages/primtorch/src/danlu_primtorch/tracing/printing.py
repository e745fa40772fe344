"""Print an FX graph, one node a line, with each value's dtype and shape: the one graph
printer of the danlu packages (danlu-aotautograd's listings and danlu's debug files and
report use it with their own value formats)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx as fx

SHORT_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


def short_dtype(dtype) -> str:
    """``f32`` for ``torch.float32``; dtypes without a short name by their own name."""
    return SHORT_DTYPES.get(dtype, str(dtype).replace("torch.", ""))


def describe_value(v) -> str:
    """``f32[2, 3](3, 1)@cuda:0`` for a tensor; tuples element-wise; scalars by repr."""
    if isinstance(v, torch.Tensor):
        dtype = short_dtype(v.dtype)
        shape = ", ".join(str(s) for s in v.shape)
        stride = ", ".join(str(s) for s in v.stride())
        off = f"+{v.storage_offset()}" if v.storage_offset() else ""
        return f"{dtype}[{shape}]({stride}){off}@{v.device}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(describe_value(e) for e in v) + ")"
    return repr(v)


def brief_value(v) -> str:
    """``f32[3, 4]`` for a tensor (real, fake or traced), with its strides when it is not
    contiguous; tuples element-wise; other values by their type's name."""
    if isinstance(v, torch.Tensor):
        shape = ", ".join(str(s) for s in v.shape)
        try:
            strided = v.layout == torch.strided and not v.is_contiguous()
            strides = f" strides {tuple(v.stride())}" if strided else ""
        except (RuntimeError, TypeError):  # a tensor type without strides
            strides = ""
        return f"{short_dtype(v.dtype)}[{shape}]{strides}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(brief_value(e) for e in v) + ")"
    return type(v).__name__


def _arg(a) -> str:
    if isinstance(a, fx.Node):
        return f"%{a.name}"
    if isinstance(a, (tuple, list)):
        inner = ", ".join(_arg(e) for e in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_arg(v)}" for k, v in a.items()) + "}"
    return repr(a)


def target_name(n: fx.Node) -> str:
    """ATen overloads by their full name, methods as ``Tensor.name``, submodules as
    ``module name``, other functions with their module (``torch.relu``; operators bare)."""
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_module":
        return f"module {n.target}"
    if isinstance(n.target, torch._ops.OpOverload):
        return str(n.target)
    mod = getattr(n.target, "__module__", None) or ""
    name = getattr(n.target, "__name__", str(n.target))
    return f"{mod}.{name}" if mod and mod not in ("_operator", "builtins") else name


def format_graph(
    gm: fx.GraphModule | fx.Graph,
    *,
    value: Callable = describe_value,
    title: str | None = None,
    input_names: bool = False,
    comments: bool = False,
) -> str:
    """One line per node: ``%name: <value> = op(args)``, values as ``value`` writes them
    (``describe_value``: dtype, shape, strides and device; ``brief_value``: dtype and shape).
    ``title``: a first line, and the nodes indented under it; ``input_names``: each input's
    placeholder target after ``input``; ``comments``: a node's ``meta["source"]`` after it."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    indent = "  " if title else ""
    lines = [f"{title}:"] if title else []
    for n in graph.nodes:
        meta = n.meta.get("val", n.meta.get("example_value"))
        val = "?" if meta is None and "val" not in n.meta else value(meta)
        if n.op == "placeholder":
            line = f"%{n.name}: {val} = input" + (f" {n.target}" if input_names else "")
        elif n.op == "get_attr":
            line = f"%{n.name}: {val} = constant {n.target}"
        elif n.op == "output":
            line = f"return {_arg(n.args[0])}"
        else:
            args = [_arg(a) for a in n.args] + [f"{k}={_arg(v)}" for k, v in n.kwargs.items()]
            line = f"%{n.name}: {val} = {target_name(n)}({', '.join(args)})"
            if comments and "source" in n.meta:
                line += f"  # {n.meta['source']}"
        lines.append(indent + line)
    return "\n".join(lines)
