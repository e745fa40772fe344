"""Entry points: ``compile_fx`` (ATen graphs) and ``inference_backend`` (capture graphs)."""

from __future__ import annotations

import logging
import os
import pathlib
import time

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.codegen.cpp.backend import CppBackend
from danlu_inductor.codegen.wrapper import WrapperCodegen
from danlu_inductor.graph import GraphLowering
from danlu_inductor.lowering import NotLowered
from danlu_inductor.scheduler import Scheduler

log = logging.getLogger("danlu_inductor")


class CompiledGraph:
    """The callable ``compile_fx`` returns; keeps every artefact for inspection."""

    def __init__(self, call, out_spec, wrapper_source, kernel_source, graph, scheduler, report):
        self._call = call
        self.out_spec = out_spec
        self.wrapper_source = wrapper_source
        self.kernel_source = kernel_source
        self.graph = graph
        self.scheduler = scheduler
        self.report = report

    def __call__(self, *args):
        flat = self._call(list(args))
        return pytree.tree_unflatten(flat, self.out_spec)

    # ------------------------------------------------------------- what it made
    @property
    def num_kernels(self) -> int:
        return self.report["kernels"]

    def loop_ir(self) -> str:
        out = []
        for buf in self.graph.buffers:
            out.append(buf.dump())
        return "\n".join(out)

    def fusion_decisions(self) -> str:
        return self.scheduler.describe()


class EagerGraph:
    """Runs the graph eagerly (used when it cannot be compiled); says why."""

    def __init__(self, gm, reason):
        self.gm = gm
        self.reason = reason
        self.report = {"kernels": 0, "fallback_reason": reason}
        self.num_kernels = 0

    def __call__(self, *args):
        return self.gm(*args)


def compile_fx(gm: torch.fx.GraphModule, example_inputs):
    """Compile an ATen-level FX graph (flat tensor inputs) into a Python callable."""
    return compile_fx_batch([(gm, example_inputs)])[0]


def compile_fx_batch(items):
    """Compile several graphs with one C++ compiler run (the compiler's start-up dominates
    small graphs). Returns one callable per ``(gm, example_inputs)``."""
    prepared = []
    for i, (gm, example_inputs) in enumerate(items):
        prefix = f"g{i}_" if len(items) > 1 else ""
        prepared.append(_prepare(gm, example_inputs, prefix))
    names, sources, nargs = [], [], {}
    for p in prepared:
        if isinstance(p, tuple):
            w = p[2]
            names += w.kernel_names
            sources += w.kernel_sources
            nargs.update(w.kernel_nargs)
    t0 = time.perf_counter()
    fns, so_path, kernel_source = CppBackend().build(names, sources, nargs)
    build_s = time.perf_counter() - t0
    out = []
    for p, (gm, _) in zip(prepared, items):
        if not isinstance(p, tuple):
            out.append(p)
            continue
        graph, scheduler, wrapper, times = p
        namespace: dict = {}
        exec(compile(wrapper.source, "<danlu_inductor wrapper>", "exec"), namespace)
        mine = {k: fns[k] for k in wrapper.kernel_names}
        call = namespace["make_call"](mine, wrapper.consts)
        report = {
            "kernels": len(wrapper.kernel_names),
            "extern_calls": sum(graph.externs.values()),
            "fallback_calls": sum(graph.fallbacks.values()),
            "fallback_ops": dict(graph.fallbacks),
            "lowering_s": times[0],
            "codegen_s": times[1],
            "compile_s": build_s,
            "library": str(so_path) if so_path else None,
            "memory": list(wrapper.memory_log),
        }
        if graph.fallbacks:
            log.info("danlu_inductor: fallback kernels: %s", dict(graph.fallbacks))
        own_source = "\n".join(wrapper.kernel_sources)
        compiled = CompiledGraph(
            call, graph.out_spec, wrapper.source, own_source, graph, scheduler, report
        )
        _maybe_dump(compiled, gm)
        out.append(compiled)
    del kernel_source
    return out


def _prepare(gm, example_inputs, prefix):
    t0 = time.perf_counter()
    bad = [x for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type != "cpu"]
    if bad:
        log.warning("danlu_inductor: non-CPU inputs, running the graph eagerly")
        return EagerGraph(gm, "non-CPU inputs (only the C++ backend exists yet)")
    try:
        graph = GraphLowering(gm, example_inputs).run()
    except NotLowered as e:
        log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", e)
        return EagerGraph(gm, str(e))
    t1 = time.perf_counter()
    scheduler = Scheduler(graph)
    wrapper = WrapperCodegen(graph, scheduler, CppBackend(), kernel_prefix=prefix)
    wrapper.source = wrapper.generate()
    t2 = time.perf_counter()
    return graph, scheduler, wrapper, (t1 - t0, t2 - t1)


_dump_counter = [0]


def _maybe_dump(compiled: CompiledGraph, gm):
    root = os.environ.get("DANLU_DEBUG_DIR")
    if not root:
        return
    _dump_counter[0] += 1
    d = pathlib.Path(root) / f"graph_{os.getpid()}_{_dump_counter[0]}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "fx_graph.txt").write_text(str(gm.graph))
    (d / "loop_ir.txt").write_text(compiled.loop_ir())
    (d / "fusion.txt").write_text(compiled.fusion_decisions())
    (d / "wrapper.py").write_text(compiled.wrapper_source)
    (d / "kernels.cpp").write_text(compiled.kernel_source)
    log.info("danlu_inductor: wrote %s", d)
