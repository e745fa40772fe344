"""The debug directory: every artefact of every compile, one folder per captured graph.

With `danlu.config.debug_dir` (or `DANLU_DEBUG_DIR`) set, each process writes

    <debug_dir>/run_<date>_<time>_pid<pid>/
        index.md, index.json        one row per captured graph: where it came from, its size,
                                    phase times, kernels, the files in its folder
        graph_000/
            captured_graph.py       the FX graph capture produced, as runnable Python
            captured_graph.txt      the same graph as a table: one node a line, shapes, dtypes
            guards.txt              the checks that must pass for this graph to be reused
            aot_graphs.txt          joint, forward and backward graphs, the partition report
            forward_0.aten.txt      each ATen graph handed to the graph compiler (forward,
            forward_0.aten.py       backward or inference), as a table and as Python
            forward_0.loop_ir.txt   inductor's loop IR, its fusion decisions, the generated
            forward_0.fusion.txt    kernels and the wrapper module that calls them
            forward_0.kernels.cpp   (.py for Triton kernels)
            forward_0.wrapper.py
        graph_001/ ...

Writing happens inside the compile, never on the hot path (guards are written on the graph's
first call, when capture has finished building them).
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import torch


def graph_table(gm: torch.fx.GraphModule) -> str:
    """One node a line: `%name: f32[3, 4] = target(args)` (danlu-primtorch's printer)."""
    from danlu_primtorch.tracing.printing import brief_value, format_graph

    return format_graph(gm, value=brief_value, input_names=True) + "\n"


class DebugRun:
    """This process's folder under one debug directory, and its index."""

    def __init__(self, debug_dir: str):
        stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime())
        self.root = pathlib.Path(debug_dir) / f"run_{stamp}_pid{os.getpid()}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.graphs: list[GraphDump] = []

    def new_graph(self, entry: dict) -> GraphDump:
        dump = GraphDump(self, self.root / f"graph_{len(self.graphs):03d}", entry)
        self.graphs.append(dump)
        return dump

    def write_index(self) -> None:
        entries = [g.entry for g in self.graphs]
        (self.root / "index.json").write_text(json.dumps(entries, indent=1) + "\n")
        lines = [
            "# danlu debug directory",
            "",
            f"pid {os.getpid()}, torch {torch.__version__}. One folder per graph handed to a "
            "backend; phase times in seconds.",
            "",
            "| folder | captured from | ops | inputs | backend | compile s | kernels | ends with "
            "| files |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for e in entries:
            phases = ", ".join(f"{k} {v:.3f}" for k, v in e.get("phases", {}).items())
            kernels = e.get("kernels")
            lines.append(
                f"| {e['folder']} | {e.get('where') or '?'} | {e['ops']} | {e['inputs']} "
                f"| {e['backend']} | {phases or '—'} "
                f"| {'—' if kernels is None else kernels} "
                f"| {e.get('ends_with') or 'return'} | {_grouped(e['files'])} |"
            )
        (self.root / "index.md").write_text("\n".join(lines) + "\n")


def _grouped(files: list[str]) -> str:
    """`forward_0.*` for the several files of one stem, the name itself for a single file."""
    stems: dict[str, list[str]] = {}
    for f in files:
        stems.setdefault(f.split(".", 1)[0], []).append(f)
    return ", ".join(names[0] if len(names) == 1 else f"{stem}.*" for stem, names in stems.items())


class GraphDump:
    """The folder of one captured graph."""

    def __init__(self, run: DebugRun, folder: pathlib.Path, entry: dict):
        self.run = run
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.entry = dict(entry, folder=folder.name, files=[])
        self._counts: dict[str, int] = {}

    def write(self, name: str, text: str) -> None:
        (self.folder / name).write_text(text if text.endswith("\n") else text + "\n")
        if name not in self.entry["files"]:
            self.entry["files"].append(name)

    def captured(self, gm: torch.fx.GraphModule) -> None:
        self.write("captured_graph.py", gm.code.strip())
        self.write("captured_graph.txt", graph_table(gm))

    def aten_graph(self, kind: str, gm: torch.fx.GraphModule) -> str:
        """Write an ATen graph handed to a graph compiler; returns its file stem."""
        n = self._counts.get(kind, 0)
        self._counts[kind] = n + 1
        stem = f"{kind}_{n}"
        self.write(f"{stem}.aten.txt", graph_table(gm))
        self.write(f"{stem}.aten.py", gm.code.strip())
        return stem

    def inductor(self, stem: str, compiled) -> None:
        """inductor's artefacts for one ATen graph, through CompiledGraph's public surface."""
        reason = (getattr(compiled, "report", None) or {}).get("fallback_reason")
        if reason:
            self.write(f"{stem}.eager.txt", f"inductor ran this graph eagerly: {reason}")
            return
        language = (
            "py" if (getattr(compiled, "report", None) or {}).get("backend") == "triton" else "cpp"
        )
        for suffix, get in (
            ("loop_ir.txt", lambda c: c.loop_ir()),
            ("fusion.txt", lambda c: c.fusion_decisions()),
            (f"kernels.{language}", lambda c: c.kernel_source),
            ("wrapper.py", lambda c: c.wrapper_source),
        ):
            try:
                text = get(compiled)
            except AttributeError:
                continue
            if text:
                self.write(f"{stem}.{suffix}", text)
        report = getattr(compiled, "report", None)
        if report:
            keep = {k: v for k, v in report.items() if k != "memory"}
            self.write(f"{stem}.report.json", json.dumps(keep, indent=1, default=str))

    def finish(self, **fields) -> None:
        self.entry.update(fields)
        self.run.write_index()


_runs: dict[str, DebugRun] = {}


def run_for(debug_dir: str | None) -> DebugRun | None:
    """This process's run folder under `debug_dir` (made on first use), or None when off."""
    if not debug_dir:
        return None
    key = str(pathlib.Path(debug_dir).resolve())
    run = _runs.get(key)
    if run is None or not run.root.is_dir():
        run = _runs[key] = DebugRun(debug_dir)
    return run
