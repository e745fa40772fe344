"""Readable listings of what a compilation made: joint, forward and backward graphs, the saved
values report and the phase timings."""

from __future__ import annotations

import torch
import torch.fx as fx

from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor

_DTYPE = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "b8",
    torch.uint8: "u8",
}


def _type(val) -> str:
    if isinstance(val, ShadowTensor):
        dt = _DTYPE.get(val.dtype, str(val.dtype).replace("torch.", ""))
        return f"{dt}{list(val.shape)}"
    if isinstance(val, (list, tuple)):
        return "(" + ", ".join(_type(v) for v in val) + ")"
    return type(val).__name__


def _arg(a) -> str:
    if isinstance(a, fx.Node):
        return "%" + a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_arg(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    return repr(a)


def format_graph(gm: fx.GraphModule, title: str = "graph") -> str:
    """One line per node: ``%name: type = op(args)``."""
    lines = [f"{title}:"]
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if n.op == "placeholder":
            lines.append(f"  %{n.name}: {_type(val)} = input")
        elif n.op == "get_attr":
            lines.append(f"  %{n.name}: {_type(val)} = constant {n.target}")
        elif n.op == "output":
            lines.append(f"  return {_arg(n.args[0])}")
        else:
            target = getattr(n.target, "__name__", str(n.target))
            if isinstance(n.target, torch._ops.OpOverload):
                target = str(n.target)
            args = [_arg(a) for a in n.args] + [f"{k}={_arg(v)}" for k, v in n.kwargs.items()]
            line = f"  %{n.name}: {_type(val)} = {target}({', '.join(args)})"
            if "source" in n.meta:
                line += f"  # {n.meta['source']}"
            lines.append(line)
    return "\n".join(lines)


def format_compiled(compiled) -> str:
    """Everything one CompiledProgram holds, as text."""
    prog = compiled.program
    parts = []
    if prog.joint:
        parts.append(format_graph(prog.graph_module, "joint graph"))
        parts.append(format_graph(compiled.partition.forward, "forward graph"))
        parts.append(format_graph(compiled.partition.backward, "backward graph"))
        parts.append(compiled.partition.report())
    else:
        parts.append(format_graph(prog.graph_module, "inference graph"))
    if prog.written_inputs:
        parts.append(f"inputs written back after each call: {prog.written_inputs}")
    if prog.shape_env is not None:
        guards = prog.shape_env.format_guards() or "(none)"
        parts.append("shape guards:\n" + "\n".join("  " + g for g in guards.splitlines()))
    timing = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in compiled.timings.items())
    parts.append(f"timings: {timing}")
    return "\n\n".join(parts)


def format_aot(aot) -> str:
    """All compilations of an aot_function / aot_module / aot_graph result."""
    aot = getattr(aot, "aot_module", aot)
    aot = getattr(aot, "aot", aot)
    if not aot.compiled:
        return "(nothing compiled yet)"
    return "\n\n".join(
        f"=== compilation {i} ===\n{format_compiled(c)}" for i, c in enumerate(aot.compiled)
    )


def print_graphs(aot) -> None:
    print(format_aot(aot))


def saved_bytes_report(aot) -> str:
    aot = getattr(aot, "aot_module", aot)
    aot = getattr(aot, "aot", aot)
    return "\n".join(c.partition.report() for c in aot.compiled if c.partition is not None)
