"""What was compiled: graphs handed to the backend, their sizes, per-phase compile times and
kernel counts, collected by wrapping the backend that `danlu.compile` uses.

Phases (seconds, summed over every compile since the last `danlu.reset()`):

- capture: danlu-dynamo tracing bytecode into FX graphs (its segment times minus the backend);
- autograd: danlu-aotautograd tracing at ATen level, functionalizing, partitioning;
- lowering: danlu-inductor turning ATen graphs into loop IR;
- codegen: danlu-inductor scheduling, fusing and writing kernel and wrapper source;
- backend compile: the C++ compiler run (or, for a backend that is not danlu's, its whole call);
- other: what is left of the backend call (building wrappers, the debug directory, ...).
"""

from __future__ import annotations

import contextvars
import logging
import time
import weakref
from dataclasses import dataclass, field

from . import debug
from .fallback import EagerOnFailure
from .logs import perf_log
from .progress import progress

log = logging.getLogger("danlu")

PHASES = ("capture", "autograd", "lowering", "codegen", "backend compile", "other")


@dataclass
class GraphRecord:
    """One graph capture handed to the backend."""

    ops: int
    inputs: int
    backend_s: float = 0.0
    kernels: int | None = None
    fallbacks: int | None = None
    phases: dict = field(default_factory=dict)
    index: int = 0
    backend: str = ""
    where: str | None = None  # the function (file:line) and bytecode offset it was captured at
    ends_with: str | None = None  # the graph break that ended it, if any
    debug_folder: str | None = None
    error: str | None = None  # the backend's error, when the graph runs eagerly instead
    cache: str | None = None  # the graph cache: "hit" (loaded) or "miss" (compiled, stored)
    _gm: object = field(default=None, repr=False)
    _aot: object = field(default=None, repr=False)  # weak ref to the aotautograd module, if any


@dataclass
class KernelGraphRecord:
    """One ATen graph (forward, backward or inference) that inductor turned into kernels."""

    kernels: int
    fallback_ops: dict
    label: str = ""  # "forward graph of graph 0", ...
    graph: int | None = None  # index of the captured graph (GraphRecord) it belongs to
    _compiled: object = field(default=None, repr=False)  # weak reference (for the report)


# The graph whose backend call is running: danlu's own backends record their phases into it.
_active: contextvars.ContextVar = contextvars.ContextVar("danlu_active_graph", default=None)


def active_graph():
    """(GraphRecord, GraphDump or None) of the backend call in progress, or None."""
    return _active.get()


class CompileStats:
    _current = None

    def __init__(self):
        self.graphs: list[GraphRecord] = []
        self.kernel_graphs: list[KernelGraphRecord] = []
        self.captures: list = []  # capture contexts: graph breaks, capture times, guards
        self._phases: dict[str, float] = {}

    @classmethod
    def current(cls) -> CompileStats:
        """The stats object every compile records into (cleared by `danlu.reset()`)."""
        if cls._current is None:
            cls._current = cls()
        return cls._current

    def clear(self) -> None:
        self.graphs.clear()
        self._phases.clear()
        self.kernel_graphs.clear()
        self.captures.clear()

    # ------------------------------------------------------------------ recording
    def record_kernels(self, compiled, label: str = "", graph=None) -> KernelGraphRecord:
        """Count the kernels of one compiled ATen graph; `graph` is its GraphRecord. A weak
        reference to `compiled` is kept for `danlu.report` (the sources are read from it only
        when a report is written)."""
        report = getattr(compiled, "report", None) or {}
        record = KernelGraphRecord(report.get("kernels", 0), dict(report.get("fallback_ops", {})))
        record.label = label
        record.graph = getattr(graph, "index", None)
        record._compiled = _weak(compiled)
        self.kernel_graphs.append(record)
        return record

    def add_phase(self, phase: str, seconds: float, graph: GraphRecord | None = None) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")
        self._phases[phase] = self._phases.get(phase, 0.0) + seconds
        if graph is not None:
            graph.phases[phase] = graph.phases.get(phase, 0.0) + seconds

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase, in pipeline order; capture is read from the capture contexts."""
        merged = dict(self._phases)
        capture = self.capture_seconds()
        if capture is not None:
            merged["capture"] = capture
        return {p: merged[p] for p in PHASES if p in merged}

    @property
    def compile_seconds(self) -> float:
        return sum(self.phases.values())

    def capture_seconds(self) -> float | None:
        """Time capture spent tracing: its per-segment times include the backend call, so the
        backend time of the graphs it produced is subtracted. None when capture reports none."""
        segments = [s for ctx in self.captures for s in getattr(ctx, "records", ())]
        if not segments or any(getattr(s, "capture_time", None) is None for s in segments):
            return None
        backend_s = {}  # id of a live captured graph -> the backend time spent on it
        for g in self.graphs:
            gm = g._gm() if g._gm is not None else None
            if gm is not None:
                backend_s[id(gm)] = g.backend_s
        return sum(
            max(0.0, s.capture_time - backend_s.get(id(getattr(s, "gm", None)), 0.0))
            for s in segments
        )

    @property
    def ddp_splits(self) -> list:
        """How graphs captured inside DistributedDataParallel were split at its buckets."""
        return [s for c in self.captures for s in getattr(c, "ddp_splits", ())]

    @property
    def graph_breaks(self) -> int:
        return sum(len(getattr(c, "breaks", ())) for c in self.captures)

    def _segment_of(self, gm):
        """(location, capture segment) that produced `gm`, or (None, None)."""
        for ctx in self.captures:
            for seg in getattr(ctx, "records", ()):
                if getattr(seg, "gm", None) is gm:
                    return _location(ctx, seg), seg
        return None, None

    def _complete(self, record: GraphRecord) -> None:
        """Fill what capture knows only after the backend returned: where, capture time."""
        gm = record._gm() if record._gm is not None else None
        if gm is None or "capture" in record.phases:
            return
        where, seg = self._segment_of(gm)
        if seg is None:
            return
        record.where = where
        brk = getattr(seg, "graph_break", None)
        if brk is not None:
            record.ends_with = f"graph break at {brk.user_loc}: {brk.reason}"
        seconds = getattr(seg, "capture_time", None)
        if seconds is not None:
            record.phases["capture"] = max(0.0, seconds - record.backend_s)

    def wrap_backend(self, backend, name: str = ""):
        """A backend that calls `backend` and records the graph it compiled: its size, the time
        of each phase, and (with a debug directory) every artefact."""
        own = getattr(backend, "danlu_phases", False)

        def recording_backend(gm, example_inputs):
            from .config import config

            ops = sum(
                1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")
            )
            record = GraphRecord(ops=ops, inputs=len(example_inputs), index=len(self.graphs))
            record.backend = name or getattr(backend, "__name__", type(backend).__name__)
            record._gm = weakref.ref(gm)
            run = debug.run_for(config.debug_dir)
            dump = None
            if run is not None:
                dump = run.new_graph(
                    {"ops": ops, "inputs": len(example_inputs), "backend": record.backend}
                )
                record.debug_folder = str(dump.folder)
                dump.captured(gm)
            token = _active.set((record, dump))
            start = time.perf_counter()
            try:
                with progress(record.index):
                    compiled = backend(gm, example_inputs)
            except Exception as e:
                # Never a crash deep inside: this graph runs eagerly, and the log says why.
                log.warning(
                    "backend %s failed on graph %d (%d ops): %s: %s; running it eagerly",
                    record.backend,
                    record.index,
                    ops,
                    type(e).__name__,
                    e,
                )
                record.error = f"backend failed: {type(e).__name__}: {e}"
                compiled = gm.forward
            finally:
                _active.reset(token)
            if getattr(compiled, "__self__", None) is not gm:
                # a failure inside danlu at a call (a lazy trace, a kernel build or launch)
                # runs the graph eagerly too (fallback.py)
                compiled = EagerOnFailure(compiled, gm, record)
            record.backend_s = time.perf_counter() - start
            rest = record.backend_s - sum(record.phases.values())
            self.add_phase("other" if own else "backend compile", max(0.0, rest), record)
            if record.kernels is None:
                record.kernels = getattr(compiled, "kernel_count", None)
            record._aot = _weak(getattr(compiled, "aot_module", None))
            self.graphs.append(record)
            if dump is not None:
                _dump_aot(dump, compiled)
                dump.finish(**_index_fields(record))
            perf = perf_log.isEnabledFor(logging.INFO)
            if dump is None and not perf:
                return compiled

            def on_first_call():
                # Capture appends the segment (guards, timing) once the backend has returned.
                self._complete(record)
                if dump is not None:
                    _, seg = self._segment_of(gm)
                    guards = getattr(seg, "guards", None)
                    if guards is not None:
                        dump.write("guards.txt", str(guards))
                    dump.finish(**_index_fields(record))
                if perf:
                    perf_log.info("%s", _graph_line(record))

            return FirstCall(compiled, on_first_call)

        recording_backend.__name__ = f"recording_{record_name(backend, name)}"
        return recording_backend

    # ------------------------------------------------------------------ reporting
    def summary(self) -> str:
        for g in self.graphs:
            self._complete(g)
        lines = [f"captured graphs: {len(self.graphs)}, graph breaks: {self.graph_breaks}"]
        for g in self.graphs:
            lines.append("  " + _graph_line(g))
        for split in self.ddp_splits:
            lines.append(f"DDP: a captured graph of {split.graph_nodes} nodes: {split.describe()}")
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
        phases = self.phases
        if phases:
            lines.append(f"compile time: {sum(phases.values()):.2f} s")
            for phase, seconds in phases.items():
                lines.append(f"{phase:>17}: {seconds:.2f} s")
        first = self.first_run_seconds()
        if first is not None:
            lines.append(
                f"first runs of the compiled graphs (kernel loads, autotuning): {first:.2f} s"
            )
        return "\n".join(lines)

    def first_run_seconds(self) -> float | None:
        """The compiled ATen graphs' first calls, summed (outside the compile phases: on a GPU
        each kernel's first launch loads its binary and times its candidate configs); None
        before any has run."""
        times = []
        for k in self.kernel_graphs:
            compiled = k._compiled() if k._compiled is not None else None
            t = (getattr(compiled, "report", None) or {}).get("first_run_s")
            if t is not None:
                times.append(t)
        return sum(times) if times else None


class FirstCall:
    """Calls `fn`; runs `on_first` once before the first call (used only while debugging or
    logging perf, so the normal path returns the backend's callable untouched)."""

    def __init__(self, fn, on_first):
        self.fn = fn
        self._on_first = on_first

    def __call__(self, *args):
        if self._on_first is not None:
            on_first, self._on_first = self._on_first, None
            on_first()
        return self.fn(*args)

    def __getattr__(self, name):
        return getattr(self.__dict__["fn"], name)


def _weak(obj):
    """A weak reference to `obj`, or None (for None, or what cannot be weakly referenced)."""
    if obj is None:
        return None
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def record_name(backend, name):
    return name or getattr(backend, "__name__", type(backend).__name__)


def _graph_line(g: GraphRecord) -> str:
    extra = ""
    if g.kernels is not None:
        extra += f", {g.kernels} kernels"
    if g.fallbacks:
        extra += f", {g.fallbacks} ATen fallbacks"
    phases = ", ".join(f"{k} {v:.3f}" for k, v in _ordered(g.phases).items())
    where = f" from {g.where}" if g.where else ""
    if g.cache:
        extra += f", graph cache {g.cache}"
    if g.error:
        extra += f", ran eagerly: {g.error[:160]}"
    return (
        f"graph {g.index}{where}: {g.ops} ops, {g.inputs} inputs, "
        f"backend {g.backend_s:.2f} s{extra}" + (f" ({phases})" if phases else "")
    )


def _ordered(phases: dict) -> dict:
    return {p: phases[p] for p in PHASES if p in phases}


def _index_fields(record: GraphRecord) -> dict:
    return {
        "where": record.where,
        "ends_with": record.ends_with,
        "phases": {k: round(v, 4) for k, v in _ordered(record.phases).items()},
        "backend_s": round(record.backend_s, 4),
        "kernels": record.kernels,
        "fallbacks": record.fallbacks,
        "error": record.error,
    }


def _dump_aot(dump, compiled) -> None:
    """The joint/forward/backward listing, when an aotautograd backend made `compiled`."""
    if getattr(compiled, "aot_module", None) is None:
        return
    from danlu_aotautograd import format_aot

    dump.write("aot_graphs.txt", format_aot(compiled))


def segment_code(ctx, seg) -> tuple:
    """``(code, offset)`` of the frame a captured segment belongs to, ``(None, 0)`` if unknown."""
    code = getattr(seg, "code", None)
    if code is not None:  # capture through the frame hook: the entry knows its code
        return code, getattr(seg, "offset", 0)
    for code, cache in getattr(ctx, "caches", {}).items():
        for offset, segs in getattr(cache, "entries", {}).items():
            if any(s is seg for s in segs):
                return code, offset
    return None, 0


def _location(ctx, seg) -> str | None:
    code, offset = segment_code(ctx, seg)
    if code is None:
        return None
    where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    return where + (f" offset {offset}" if offset else "")
