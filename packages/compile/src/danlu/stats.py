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
class CompileStats:
    graphs: list[GraphRecord] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)

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
        lines = [f"compiled graphs: {len(self.graphs)}"]
        for i, g in enumerate(self.graphs):
            extra = ""
            if g.kernels is not None:
                extra += f", {g.kernels} kernels"
            if g.fallbacks:
                extra += f", {g.fallbacks} ATen fallbacks"
            lines.append(
                f"  graph {i}: {g.ops} ops, {g.inputs} inputs, backend {g.backend_s:.2f} s{extra}"
            )
        for phase, seconds in sorted(self.phases.items()):
            lines.append(f"{phase:>16}: {seconds:.2f} s")
        return "\n".join(lines)
