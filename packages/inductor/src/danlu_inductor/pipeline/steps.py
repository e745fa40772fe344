"""The steps both targets take: pick the target from the graph's devices, lower the FX graph
to loop IR, schedule (fuse) it, generate the wrapper and its kernels, load the wrapper; and
what a graph that cannot be compiled gets (it runs eagerly, logged once here)."""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import re

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.codegen.wrapper import WrapperCodegen, describe_kernel
from danlu_inductor.graph import GraphLowering
from danlu_inductor.ir.symbols import size_hints
from danlu_inductor.pipeline.compiled import CompiledGraph, EagerGraph
from danlu_inductor.scheduler import Scheduler

log = logging.getLogger("danlu_inductor")


def triton_on_cpu() -> bool:
    """Internal, for tests without a GPU: CPU graphs take the Triton path (with
    ``TRITON_INTERPRET=1`` the kernels run in Triton's interpreter)."""
    return os.environ.get("DANLU_INDUCTOR_TRITON_ON_CPU", "0") == "1"


def choose_backend(gm, example_inputs):
    """-> ("cpp", device) | ("triton", device) | ("eager", reason), from the devices of
    the inputs and of every value the graph computes (its fake tensors)."""
    devices = {x.device for x in example_inputs if isinstance(x, torch.Tensor)}
    meta_inputs = any(d.type == "meta" for d in devices)
    for node in gm.graph.nodes:
        if node.op == "get_attr" and not meta_inputs:
            value = functools.reduce(lambda o, a: getattr(o, a, None), node.target.split("."), gm)
            if isinstance(value, torch.Tensor) and value.device.type == "meta":
                # Running such a graph (even eagerly) would compute with made-up values.
                raise ValueError(
                    f"danlu_inductor: the graph's constant {node.target!r} is a meta tensor "
                    "(its values were lost while tracing); refusing to compile or run it"
                )
        for v in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(v, torch.Tensor):
                devices.add(v.device)
    kinds = {d.type for d in devices}
    if len(devices) > 1:
        return "eager", f"tensors on several devices: {sorted(map(str, devices))}"
    if kinds <= {"cpu"}:
        if triton_on_cpu():
            return "triton", torch.device("cpu")
        return "cpp", torch.device("cpu")
    if kinds == {"cuda"}:
        try:
            import triton  # noqa: F401
        except ImportError:
            return "eager", "CUDA graph but triton is not installed (extra 'triton')"
        return "triton", devices.pop()
    return "eager", f"no backend for device {sorted(kinds)[0]!r} (C++ for CPU, Triton for CUDA)"


def lower(gm, example_inputs, channels_last: bool, **options) -> GraphLowering:
    """FX graph -> loop IR; ``options`` go to ``GraphLowering`` (``for_gpu``, ...)."""
    return GraphLowering(gm, example_inputs, conv_channels_last=channels_last, **options).run()


def schedule(graph: GraphLowering) -> Scheduler:
    """Loop IR -> fused groups, each a kernel to be."""
    with size_hints(graph.hint_values()):
        return Scheduler(graph)


def generate_wrapper(graph, scheduler, kernel_backend, **options) -> WrapperCodegen:
    """The wrapper module (``.source``) and, through ``kernel_backend``, its kernels' sources;
    ``options`` go to ``WrapperCodegen``."""
    with size_hints(graph.hint_values()):
        wrapper = WrapperCodegen(graph, scheduler, kernel_backend, **options)
        wrapper.source = wrapper.generate()
    return wrapper


def load_call(wrapper_source: str, filename: str, kernels: dict, *make_call_args):
    """Run the wrapper module's source; -> its ``make_call(kernels, *make_call_args)``.

    With ``DANLU_PROFILE_KERNELS=1`` every kernel runs inside a ``torch.profiler`` range named
    after what it computes, so a profile of a compiled CPU step lists each generated kernel
    (ctypes calls are otherwise invisible to the profiler)."""
    if os.environ.get("DANLU_PROFILE_KERNELS", "0") == "1":
        kernels = profiled_kernels(wrapper_source, kernels)
    namespace: dict = {}
    exec(compile(wrapper_source, filename, "exec"), namespace)
    return namespace["make_call"](kernels, *make_call_args)


_KERNEL_COMMENT = re.compile(
    r"^\s*# (\w+): (pointwise|reduction) kernel \[([^\]\n]*)\][^\n]*\n"
    r"\s*#   from FX nodes: ([^\n]*)$",
    re.MULTILINE,
)


def kernel_labels(wrapper_source: str) -> dict[str, str]:
    """Kernel name -> ``name:danlu_{poi|red}_<ops> [sizes]``, from the wrapper's comments (so
    a wrapper loaded from the graph cache is labelled the same way)."""
    labels = {}
    for name, kind, dims, origins in _KERNEL_COMMENT.findall(wrapper_source):
        what = describe_kernel(kind == "reduction", origins.split(", "))
        head = name if name.startswith(what) else f"{name}:{what}"
        labels[name] = f"{head} [{dims}]"
    return labels


def profiled_kernels(wrapper_source: str, kernels: dict) -> dict:
    labels = kernel_labels(wrapper_source)

    def wrap(name, fn):
        label = labels.get(name, name)

        def run(*args):
            with torch.profiler.record_function(label):
                return fn(*args)

        return run

    return {k: wrap(k, f) if callable(f) else f for k, f in kernels.items()}


def log_fallback_kernels(graph: GraphLowering):
    if graph.fallbacks:
        log.info("danlu_inductor: fallback kernels: %s", dict(graph.fallbacks))


def run_eagerly(gm, reason: str, cannot_lower=False, **report_entries) -> EagerGraph:
    """The graph as it is, saying why; ``cannot_lower``: lowering or code generation
    refused the graph (as opposed to a target that cannot take it or a failed build)."""
    if cannot_lower:
        log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", reason)
    else:
        log.warning("danlu_inductor: running the graph eagerly: %s", reason)
    return EagerGraph(gm, reason, **report_entries)


_dump_counter = [0]


def maybe_dump(compiled: CompiledGraph, gm):
    """With ``DANLU_DEBUG_DIR`` set: the FX graph, loop IR, fusion decisions, wrapper and
    kernels of a compiled graph, in a folder of their own."""
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
    suffix = "py" if compiled.report.get("backend") == "triton" else "cpp"
    (d / f"kernels.{suffix}").write_text(compiled.kernel_source)
    log.info("danlu_inductor: wrote %s", d)
