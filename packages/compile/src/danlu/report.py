"""`danlu.report(path)`: what this process compiled, as one self-contained HTML page.

    danlu.report("report.html")            # writes now: everything compiled so far
    with danlu.report("report.html"):      # writes now, and again when the block ends
        train()
    DANLU_REPORT=report.html python train.py   # writes when the process exits

The page has no external resources (inline CSS, a few lines of inline JS, SVG charts) and
holds: every compiled frame, the graph breaks with the user's file:line and a hint, the
recompiles and the guards of each graph, each captured graph with its forward/backward ATen
graphs and the partitioner's saved values, the generated kernels per ATen graph, what fell
back to eager or ATen and why, compile time per phase, and the memory the partitioner saved.

Nothing extra is recorded while compiling: `CompileStats` already keeps the capture contexts
(graphs, breaks, guards, recompiles) and weak references to what aotautograd and inductor
made; this module reads them only when a page is written. What has been freed since (a
compiled function that was deleted) is reported as no longer in memory. The data is
gathered here (`collect`) and rendered by `report_html`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from .stats import CompileStats, segment_code

# (pattern in a graph break's reason, what to do about it); the first match wins
_HINTS: tuple[tuple[str, str], ...] = (
    (
        r"internal capture error",
        "An error inside danlu's capture, not in your code: the frame runs eagerly. Please "
        "report it (this page helps).",
    ),
    (
        r"control flow|truth value|__bool__ depends on tensor data",
        "Python branches on a tensor's value. Use torch.where(cond, a, b) (or compute both "
        "sides and select), or move the check out of the compiled function.",
    ),
    (
        r"print\(\)|side effect on stdout|logging|warnings\.warn",
        "Printing or logging inside the compiled function stops the graph. Move it out of "
        "the hot path, or log after the call.",
    ),
    (
        r"item\(\)|tolist|reads data|data-dependent|float\(\)|int\(\)",
        "A tensor's value is read into Python (.item(), .tolist(), float(t)). Keep it a "
        "tensor (e.g. torch.where, torch.clamp), or read it outside the compiled function.",
    ),
    (
        r"symbolic",
        "A dynamic size is used as a plain Python value. Use tensor ops on sizes, or "
        "danlu.mark_static(t, dim) / danlu.compile(..., dynamic=False).",
    ),
    (
        r"NumPy|np\.",
        "This NumPy use is not traced. Use the torch equivalent inside the compiled function.",
    ),
    (
        r"not captured|not a Python function|C extension|wrapped torch function|builtin",
        "A call danlu cannot trace into (a C extension or builtin). Call it outside the "
        "compiled function, or make it a custom op (torch.library.custom_op).",
    ),
    (
        r"generator|iterator|iterating",
        "Iteration over this object is not traced. Build a list or tuple before the loop.",
    ),
)
_DEFAULT_HINT = (
    "See 'Troubleshooting graph breaks' in the user guide; danlu.compile(..., fullgraph=True) "
    "raises at this break with a traceback."
)


def break_hint(reason: str) -> str:
    """What the user can do about a graph break with this reason."""
    for pattern, hint in _HINTS:
        if re.search(pattern, reason, flags=re.IGNORECASE):
            return hint
    return _DEFAULT_HINT


_FALLBACK_OP_REASON = (
    "no danlu-inductor lowering for this op (or not for these arguments): the generated "
    "wrapper calls the ATen kernel"
)
MAX_SOURCE_CHARS = 300_000  # per artefact: a huge kernel file is cut, and says so


# ------------------------------------------------------------------------------- the data
@dataclasses.dataclass
class Frame:
    function: str
    file: str
    line: int
    graphs: int = 0  # captured graphs with ops
    entries: int = 0  # compiled versions (cache entries), resume points included
    breaks: int = 0
    recompiles: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Break:
    user_loc: str
    reason: str
    function: str
    count: int = 1

    @property
    def hint(self) -> str:
        return break_hint(self.reason)


@dataclasses.dataclass
class AtenGraph:
    kind: str  # forward / backward / inference
    text: str


@dataclasses.dataclass
class KernelGraph:
    label: str
    kernels: int
    fallback_ops: dict
    language: str = "cpp"
    kernel_source: str | None = None
    wrapper_source: str | None = None
    fallback_reason: str | None = None  # the whole ATen graph ran eagerly
    fallback_reasons: dict = dataclasses.field(default_factory=dict)
    alive: bool = True


@dataclasses.dataclass
class Memory:
    graph: int
    compilation: int
    method: str
    saved_values: int
    saved_bytes: int  # not counting inputs
    default_bytes: int | None
    saved_by_partitioner: int | None


@dataclasses.dataclass
class Graph:
    index: int
    where: str | None
    ops: int
    inputs: int
    backend: str
    kernels: int | None
    fallbacks: int | None
    phases: dict
    backend_s: float
    ends_with: str | None
    error: str | None
    cache: str | None
    captured: str | None = None  # the FX graph capture made, as a table
    captured_code: str | None = None
    guards: str | None = None
    aten: list = dataclasses.field(default_factory=list)  # AtenGraph
    partition: list = dataclasses.field(default_factory=list)  # partition report texts
    kernel_graphs: list = dataclasses.field(default_factory=list)  # KernelGraph
    alive: bool = True


@dataclasses.dataclass
class ReportData:
    frames: list
    breaks: list
    recompiles: list
    graphs: list
    fallbacks: list  # (where, what, reason)
    phases: dict
    memory: list
    unattached_kernels: list  # KernelGraph of no known captured graph (torch.compile use)
    pid: int = 0
    torch_version: str = ""
    danlu_version: str = ""


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_SOURCE_CHARS:
        return text
    return text[:MAX_SOURCE_CHARS] + f"\n... ({len(text) - MAX_SOURCE_CHARS} more characters)"


def _deref(ref):
    return ref() if ref is not None else None


def _collect_frames(stats) -> tuple[list, list, list]:
    frames: dict = {}
    breaks: dict = {}
    recompiles: list = []
    for ctx in stats.captures:
        for seg in getattr(ctx, "records", ()):
            code = segment_code(ctx, seg)[0]
            if code is None:
                continue
            frame = frames.get(code)
            if frame is None:
                frame = frames[code] = Frame(code.co_name, code.co_filename, code.co_firstlineno)
            frame.entries += 1
            if getattr(seg, "num_ops", 0) > 0:
                frame.graphs += 1
            brk = getattr(seg, "graph_break", None)
            if brk is not None:
                frame.breaks += 1
                key = (brk.user_loc, brk.reason)
                if key in breaks:
                    breaks[key].count += 1
                else:
                    breaks[key] = Break(brk.user_loc, brk.reason, code.co_name)
        for msg in getattr(ctx, "recompiles", ()):
            recompiles.append(msg)
            for code, frame in frames.items():
                if msg.startswith(f"{code.co_filename}:{code.co_firstlineno} ") or (
                    f" {code.co_filename}:{code.co_firstlineno} " in msg
                ):
                    frame.recompiles.append(msg)
                    break
    return list(frames.values()), list(breaks.values()), recompiles


def _kernel_graph(k) -> KernelGraph:
    compiled = _deref(k._compiled)
    out = KernelGraph(k.label or "ATen graph", k.kernels, dict(k.fallback_ops))
    if compiled is None:
        out.alive = k._compiled is None  # never referenced: nothing to say it was freed
        return out
    report = getattr(compiled, "report", None) or {}
    out.fallback_reason = report.get("fallback_reason")
    out.fallback_reasons = dict(report.get("fallback_reasons", {}) or {})
    out.language = "py" if report.get("backend") == "triton" else "cpp"
    out.kernel_source = _cut(getattr(compiled, "kernel_source", None))
    out.wrapper_source = _cut(getattr(compiled, "wrapper_source", None))
    return out


def _aot_programs(aot) -> list:
    aot = getattr(aot, "aot", aot)
    return list(getattr(aot, "compiled", ()) or ())


def collect(stats: CompileStats | None = None) -> ReportData:
    """Everything the page shows, read from `stats` (default: this process's)."""
    import torch

    from . import __version__
    from .debug import graph_table

    stats = stats or CompileStats.current()
    for g in stats.graphs:
        stats._complete(g)
    frames, breaks, recompiles = _collect_frames(stats)
    kernels_by_graph: dict = {}
    unattached = []
    for k in stats.kernel_graphs:
        kg = _kernel_graph(k)
        if k.graph is None:
            unattached.append(kg)
        else:
            kernels_by_graph.setdefault(k.graph, []).append(kg)
    graphs, memory, fallbacks = [], [], []
    for rec in stats.graphs:
        g = Graph(
            rec.index,
            rec.where,
            rec.ops,
            rec.inputs,
            rec.backend,
            rec.kernels,
            rec.fallbacks,
            dict(rec.phases),
            rec.backend_s,
            rec.ends_with,
            rec.error,
            rec.cache,
        )
        gm = _deref(rec._gm)
        g.alive = gm is not None
        if gm is not None:
            g.captured = _cut(graph_table(gm))
            g.captured_code = _cut(gm.code.strip())
            _, seg = stats._segment_of(gm)
            if seg is not None and getattr(seg, "guards", None) is not None:
                g.guards = str(seg.guards)
        for i, prog in enumerate(_aot_programs(_deref(rec._aot))):
            part = getattr(prog, "partition", None)
            if part is not None:
                g.aten.append(AtenGraph(f"forward (compilation {i})", graph_table(part.forward)))
                g.aten.append(AtenGraph(f"backward (compilation {i})", graph_table(part.backward)))
                g.partition.append(part.report())
                memory.append(
                    Memory(
                        rec.index,
                        i,
                        part.method,
                        len(part.saved),
                        part.saved_bytes - part.saved_input_bytes,
                        part.details.get("default_saved_bytes"),
                        getattr(part, "memory_saved_bytes", None),
                    )
                )
            else:
                program = getattr(prog, "program", None)
                gm_inf = getattr(program, "graph_module", None)
                if gm_inf is not None:
                    g.aten.append(AtenGraph(f"inference (compilation {i})", graph_table(gm_inf)))
        g.kernel_graphs = kernels_by_graph.get(rec.index, [])
        where = f"graph {rec.index}" + (f" ({rec.where})" if rec.where else "")
        if rec.error:
            fallbacks.append((where, "the whole graph runs eagerly", rec.error))
        for kg in g.kernel_graphs:
            if kg.fallback_reason:
                fallbacks.append((f"{where}, {kg.label}", "runs eagerly", kg.fallback_reason))
            for op, n in kg.fallback_ops.items():
                reason = kg.fallback_reasons.get(op) or _FALLBACK_OP_REASON
                fallbacks.append((f"{where}, {kg.label}", f"ATen {op} ×{n}", reason))
        graphs.append(g)
    for kg in unattached:
        for op, n in kg.fallback_ops.items():
            reason = kg.fallback_reasons.get(op) or _FALLBACK_OP_REASON
            fallbacks.append((kg.label, f"ATen {op} ×{n}", reason))
    for ctx in stats.captures:
        for r in getattr(ctx, "eager_reasons", ()):
            fallbacks.append(("capture", "code runs eagerly", r))
        for r in getattr(ctx, "fallbacks", ()):
            fallbacks.append(("capture", "frame runs through the segment path", r))
    return ReportData(
        frames=frames,
        breaks=breaks,
        recompiles=recompiles,
        graphs=graphs,
        fallbacks=fallbacks,
        phases=stats.phases,
        memory=memory,
        unattached_kernels=unattached,
        pid=os.getpid(),
        torch_version=torch.__version__,
        danlu_version=__version__,
    )


# ------------------------------------------------------------------------------- the API
class Report:
    """The page at `path`. `write()` rewrites it with everything compiled so far; used as a
    context manager it is rewritten when the block ends (also when it raises)."""

    def __init__(self, path, stats: CompileStats | None = None):
        self.path = pathlib.Path(path)
        self._stats = stats

    def write(self) -> pathlib.Path:
        from .report_html import render

        text = render(collect(self._stats))
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path)
        return self.path

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc) -> bool:
        self.write()
        return False

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"danlu.report({str(self.path)!r})"


def report(path="danlu_report.html", stats: CompileStats | None = None) -> Report:
    """Write the HTML compile report of everything this process compiled so far to `path`
    and return it as a `Report`; `with danlu.report(path): ...` writes it again at the end
    of the block."""
    r = Report(path, stats)
    r.write()
    return r


def write_configured_report() -> None:
    """At exit: the report `danlu.config.report` (`DANLU_REPORT`) names, if any."""
    import logging

    from .config import config

    if not config.report:
        return
    try:
        path = Report(config.report).write()
    except Exception as e:  # at exit, a failure to write must not hide the program's own
        logging.getLogger("danlu").warning("could not write DANLU_REPORT: %s", e)
        return
    logging.getLogger("danlu").info("compile report: %s", path)


__all__ = ["Report", "ReportData", "break_hint", "collect", "report"]
