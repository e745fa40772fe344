"""Readable listings of what a compilation made: joint, forward and backward graphs, the saved
values report and the phase timings."""

from __future__ import annotations

import torch.fx as fx

from danlu_primtorch.tracing.printing import brief_value
from danlu_primtorch.tracing.printing import format_graph as _format_graph


def format_graph(gm: fx.GraphModule, title: str = "graph") -> str:
    """One line per node under ``title``: ``%name: f32[3, 4] = op(args)  # source``
    (danlu-primtorch's printer with the short value format)."""
    return _format_graph(gm, value=brief_value, title=title, comments=True)


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
