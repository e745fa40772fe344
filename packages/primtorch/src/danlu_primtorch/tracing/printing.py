"""Print an ATen graph with the shape, dtype, strides and device of every value."""

from __future__ import annotations

import torch
import torch.fx as fx

_SHORT_DTYPES = {
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


def describe_value(v) -> str:
    """``f32[2, 3](3, 1)@cuda:0`` for a tensor; tuples element-wise; scalars by repr."""
    if isinstance(v, torch.Tensor):
        dtype = _SHORT_DTYPES.get(v.dtype, str(v.dtype).replace("torch.", ""))
        shape = ", ".join(str(s) for s in v.shape)
        stride = ", ".join(str(s) for s in v.stride())
        off = f"+{v.storage_offset()}" if v.storage_offset() else ""
        return f"{dtype}[{shape}]({stride}){off}@{v.device}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(describe_value(e) for e in v) + ")"
    return repr(v)


def _arg(a) -> str:
    if isinstance(a, fx.Node):
        return f"%{a.name}"
    if isinstance(a, (tuple, list)):
        inner = ", ".join(_arg(e) for e in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_arg(v)}" for k, v in a.items()) + "}"
    return repr(a)


def format_graph(gm: fx.GraphModule | fx.Graph) -> str:
    """One line per node: ``%name: <value> = op(args)``."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    lines = []
    for n in graph.nodes:
        val = describe_value(n.meta["val"]) if "val" in n.meta else "?"
        if n.op == "placeholder":
            lines.append(f"%{n.name}: {val} = input")
        elif n.op == "get_attr":
            lines.append(f"%{n.name}: {val} = constant {n.target}")
        elif n.op == "output":
            lines.append(f"return {_arg(n.args[0])}")
        else:
            target = getattr(n.target, "__name__", str(n.target))
            if isinstance(n.target, torch._ops.OpOverload):
                target = str(n.target)
            args = [_arg(a) for a in n.args] + [f"{k}={_arg(v)}" for k, v in n.kwargs.items()]
            lines.append(f"%{n.name}: {val} = {target}({', '.join(args)})")
    return "\n".join(lines)
