"""What was compiled: graphs handed to the backend, their sizes, per-phase compile times and
kernel counts, collected by wrapping the backend that `danlu.compile` uses."""

from __future__ import annotations

import os
import pathlib
import time
from dataclasses import dataclass, field

from .logs import perf_log


@dataclass
class GraphRecord:
    ops: int
    inputs: int
    backend_s: float
    kernels: int | None = None
    fallbacks: int | None = None


@dataclass
class KernelGraphRecord:
    """One ATen graph (forward, backward or inference) that inductor turned into kernels."""

    kernels: int
    fallback_ops: dict


@dataclass
class CompileStats:
    graphs: list[GraphRecord] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    kernel_graphs: list[KernelGraphRecord] = field(default_factory=list)
    captures: list = field(default_factory=list)  # capture contexts, for graph-break counts

    _current = None

    @classmethod
    def current(cls) -> CompileStats:
        """The stats object every compile records into (cleared by `danlu.reset()`)."""
        if cls._current is None:
            cls._current = cls()
        return cls._current

    def clear(self) -> None:
        self.graphs.clear()
        self.phases.clear()
        self.kernel_graphs.clear()
        self.captures.clear()

    def record_kernels(self, compiled) -> None:
        report = getattr(compiled, "report", None) or {}
        self.kernel_graphs.append(
            KernelGraphRecord(report.get("kernels", 0), dict(report.get("fallback_ops", {})))
        )

    @property
    def graph_breaks(self) -> int:
        return sum(len(getattr(c, "breaks", ())) for c in self.captures)

    def add_phase(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        perf_log.info("%s: %.3f s", phase, seconds)

    def wrap_backend(self, backend):
        """A backend that calls `backend` and records the graph it compiled."""

        def recording_backend(gm, example_inputs):
            self._dump_captured(gm)
            start = time.perf_counter()
            compiled = backend(gm, example_inputs)
            elapsed = time.perf_counter() - start
            self.add_phase("backend compile", elapsed)
            ops = sum(
                1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")
            )
            self.graphs.append(
                GraphRecord(
                    ops=ops,
                    inputs=len(example_inputs),
                    backend_s=elapsed,
                    kernels=getattr(compiled, "kernel_count", None),
                    fallbacks=getattr(compiled, "fallback_count", None),
                )
            )
            return compiled

        return recording_backend

    def _dump_captured(self, gm) -> None:
        from .config import config

        if not config.debug_dir:
            return
        root = pathlib.Path(config.debug_dir)
        root.mkdir(parents=True, exist_ok=True)
        # the packages below read DANLU_DEBUG_DIR for their own artefacts
        os.environ["DANLU_DEBUG_DIR"] = str(root)
        index = len(self.graphs)
        (root / f"captured_graph_{index}.py").write_text(gm.code)
        lines = []
        for node in gm.graph.nodes:
            val = node.meta.get("val", node.meta.get("example_value"))
            shape = f"  # {tuple(val.shape)} {val.dtype}" if hasattr(val, "shape") else ""
            lines.append(f"{node.format_node()}{shape}")
        (root / f"captured_graph_{index}.txt").write_text("\n".join(lines) + "\n")

    def summary(self) -> str:
        lines = [f"captured graphs: {len(self.graphs)}, graph breaks: {self.graph_breaks}"]
        for i, g in enumerate(self.graphs):
            extra = ""
            if g.kernels is not None:
                extra += f", {g.kernels} kernels"
            if g.fallbacks:
                extra += f", {g.fallbacks} ATen fallbacks"
            lines.append(
                f"  graph {i}: {g.ops} ops, {g.inputs} inputs, backend {g.backend_s:.2f} s{extra}"
            )
        if self.kernel_graphs:
            kernels = sum(k.kernels for k in self.kernel_graphs)
            fallbacks: dict = {}
            for k in self.kernel_graphs:
                for op, n in k.fallback_ops.items():
                    fallbacks[op] = fallbacks.get(op, 0) + n
            lines.append(
                f"inductor: {len(self.kernel_graphs)} ATen graphs (forward/backward/inference), "
                f"{kernels} generated kernels"
                + (f", ATen fallbacks: {fallbacks}" if fallbacks else ", no ATen fallbacks")
            )
        for phase, seconds in sorted(self.phases.items()):
            lines.append(f"{phase:>16}: {seconds:.2f} s")
        return "\n".join(lines)
