"""The C++ path: each graph is lowered, scheduled and generated on its own (``generate``), then
the kernels of all of them are built by one compiler run, whose start-up dominates small
graphs, and each graph's wrapper is loaded (``build_and_load``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from danlu_inductor.codegen.cpp.backend import CppBackend
from danlu_inductor.codegen.wrapper import WrapperCodegen
from danlu_inductor.graph import GraphLowering
from danlu_inductor.lowering import NotLowered
from danlu_inductor.lowering.convolution import wants_channels_last
from danlu_inductor.pipeline.compiled import CompiledGraph, EagerGraph
from danlu_inductor.pipeline.report import graph_report
from danlu_inductor.pipeline.steps import (
    generate_wrapper,
    load_call,
    log_fallback_kernels,
    lower,
    maybe_dump,
    run_eagerly,
    schedule,
)
from danlu_inductor.scheduler import Scheduler


@dataclass
class GeneratedGraph:
    """A graph whose wrapper and kernel sources are written, waiting for the build."""

    gm: torch.fx.GraphModule
    graph: GraphLowering
    scheduler: Scheduler
    wrapper: WrapperCodegen
    lowering_s: float
    codegen_s: float


def generate(gm, example_inputs, kernel_prefix="") -> GeneratedGraph | EagerGraph:
    """Lower, schedule and generate one graph; ``kernel_prefix`` keeps kernel names apart
    when several graphs share one library."""
    t0 = time.perf_counter()
    try:
        channels_last = wants_channels_last(gm, torch.device("cpu"))
        graph = lower(gm, example_inputs, channels_last)
        t1 = time.perf_counter()
        scheduler = schedule(graph)
        wrapper = generate_wrapper(graph, scheduler, CppBackend(), kernel_prefix=kernel_prefix)
    except NotLowered as e:
        # DynamicShapeUnsupported included: the graph (symbolic or not) runs as it is
        return run_eagerly(gm, str(e), cannot_lower=True)
    except (TypeError, NotImplementedError) as e:
        if "shape_env" not in gm.meta:
            raise
        # a symbolic size where code expects a number (a sympy comparison that cannot be
        # decided, an index function the printers lack): run the graph as it is
        reason = f"symbolic sizes: {type(e).__name__}: {e}"
        return run_eagerly(gm, reason, cannot_lower=True)
    t2 = time.perf_counter()
    return GeneratedGraph(gm, graph, scheduler, wrapper, t1 - t0, t2 - t1)


def build_and_load(generated: list[GeneratedGraph]) -> list[CompiledGraph]:
    """Build every graph's kernels into one library; -> one ``CompiledGraph`` per graph."""
    names, sources, nargs, nsizes = [], [], {}, {}
    for g in generated:
        names += g.wrapper.kernel_names
        sources += g.wrapper.kernel_sources
        nargs.update(g.wrapper.kernel_nargs)
        nsizes.update(g.wrapper.kernel_nsizes)
    t0 = time.perf_counter()
    fns, so_path, _ = CppBackend().build(names, sources, nargs, nsizes)
    build_s = time.perf_counter() - t0
    return [_load(g, fns, so_path, build_s) for g in generated]


def _load(g: GeneratedGraph, fns, so_path, build_s) -> CompiledGraph:
    graph, wrapper = g.graph, g.wrapper
    mine = {k: fns[k] for k in wrapper.kernel_names}
    call = load_call(wrapper.source, "<danlu_inductor wrapper>", mine, wrapper.consts)
    report = graph_report("cpp", graph, wrapper, (g.lowering_s, g.codegen_s, build_s), so_path)
    log_fallback_kernels(graph)
    own_source = "\n".join(wrapper.kernel_sources)
    compiled = CompiledGraph(
        call, graph.out_spec, wrapper.source, own_source, graph, g.scheduler, report
    )
    compiled.consts = wrapper.consts
    compiled.build = {  # what rebuilds it from the kernels' sources (artifacts.py)
        "names": list(wrapper.kernel_names),
        "sources": list(wrapper.kernel_sources),
        "nargs": {k: wrapper.kernel_nargs[k] for k in wrapper.kernel_names},
        "nsizes": {k: wrapper.kernel_nsizes[k] for k in wrapper.kernel_names},
    }
    maybe_dump(compiled, g.gm)
    return compiled
