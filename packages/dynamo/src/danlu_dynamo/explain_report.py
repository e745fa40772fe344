"""``explain(fn)(*args)``: run once through capture and report graphs, breaks and guards."""

from __future__ import annotations

import dataclasses
import time

import torch

from .backends import eager
from .capture_context import GraphBreak
from .optimizer import optimize


@dataclasses.dataclass
class ExplainOutput:
    graphs: list  # torch.fx.GraphModule per captured segment with ops
    graph_count: int
    graph_break_count: int
    break_reasons: list  # GraphBreak (reason, user_loc)
    ops_per_graph: list  # list[list[str]]
    guards: list  # list[str] per segment
    eager_regions: list  # code that ran eagerly, and why
    capture_time: float  # seconds spent tracing (all segments)
    wall_time: float
    # frames the bytecode path could not emit, which ran through the segment path, and why
    segment_path: list = dataclasses.field(default_factory=list)
    # why each recompile happened: the failing guard, and the sizes made dynamic
    recompiles: list = dataclasses.field(default_factory=list)

    @property
    def op_count(self):
        return sum(len(o) for o in self.ops_per_graph)

    # the attribute names of torch's own explain result, for code written against it
    @property
    def out_guards(self):
        return self.guards

    @property
    def compile_times(self) -> str:
        return f"capture: {self.capture_time:.4f} s, wall: {self.wall_time:.4f} s"

    def __str__(self):
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
            f"Capture time: {self.capture_time * 1000:.1f} ms",
            f"Compile times: {self.compile_times}",
        ]
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. {b.user_loc}: {b.reason}")
        if self.eager_regions:
            lines.append("Ran eagerly:")
            lines.extend(f"  - {r}" for r in self.eager_regions)
        if self.recompiles:
            lines.append("Recompiles:")
            lines.extend(f"  - {r}" for r in self.recompiles)
        if self.segment_path:
            lines.append("Ran through the segment path (bytecode path fallback):")
            lines.extend(f"  - {r}" for r in self.segment_path)
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Graph {i}: {len(ops)} ops")
            for op in ops:
                lines.append(f"    {op}")
        lines.append("Guards:")
        for i, g in enumerate(self.guards):
            lines.append(f"  entry {i}:")
            lines.extend(f"    {x}" for x in g.splitlines())
        return "\n".join(lines)


def _op_name(node):
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    mod = getattr(t, "__module__", None)
    name = getattr(t, "__name__", str(t))
    return f"{mod}.{name}" if mod else name


def explain(fn, *extra_args, **extra_kwargs):
    def run(*args, **kwargs):
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return eager(gm, example_inputs)

        opt = optimize(backend)(fn)
        t0 = time.perf_counter()
        opt(*args, **kwargs)
        wall = time.perf_counter() - t0
        ctx = opt._capture_ctx
        segs = [s for s in ctx.records if s.num_ops > 0]
        ops = [
            [
                _op_name(n)
                for n in s.gm.graph.nodes
                if n.op in ("call_function", "call_method")
                and not (getattr(n.target, "__name__", "") == "getitem")
            ]
            for s in segs
        ]
        return ExplainOutput(
            graphs=graphs,
            graph_count=len(segs),
            graph_break_count=len(ctx.breaks),
            break_reasons=list(ctx.breaks),
            ops_per_graph=ops,
            guards=[str(s.guards) for s in ctx.records],
            eager_regions=list(ctx.eager_reasons),
            capture_time=sum(s.capture_time for s in ctx.records),
            wall_time=wall,
            segment_path=list(ctx.fallbacks),
            recompiles=list(ctx.recompiles),
        )

    if extra_args or extra_kwargs:
        return run(*extra_args, **extra_kwargs)
    return run


__all__ = ["ExplainOutput", "GraphBreak", "explain", "torch"]
