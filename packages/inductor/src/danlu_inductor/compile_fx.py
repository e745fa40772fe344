"""Entry points: ``compile_fx`` (ATen graphs) and ``inference_backend`` (capture graphs)."""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import time

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.codegen.cpp.backend import CppBackend
from danlu_inductor.codegen.wrapper import WrapperCodegen
from danlu_inductor.graph import GraphLowering
from danlu_inductor.ir.symbols import size_hints
from danlu_inductor.lowering import NotLowered
from danlu_inductor.lowering.convolution import wants_channels_last
from danlu_inductor.options import validate_options
from danlu_inductor.passes.constant_folding import fold_constants
from danlu_inductor.passes.cpu_scalars import move_cpu_scalars
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
        self.artifacts: list = []  # Triton: one TritonKernelArtifact per kernel
        self.launchers: dict = {}  # Triton: kernel name -> TritonLauncher
        self.consts: dict = {}  # what the wrapper's make_call got
        self.build: dict | None = None  # the kernels' sources, for artifacts.py

    def __call__(self, *args):
        flat = self._call(list(args))
        return pytree.tree_unflatten(flat, self.out_spec)

    # ------------------------------------------------------------- what it made
    @property
    def output_strides(self) -> list | None:
        """Strides of each output as the compiled code returns it (None for non-tensors);
        outputs saved for the backward may differ from the trace's (lowering/convolution.py)."""
        graph = self.graph
        return graph.output_strides if graph is not None else None

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
        self.report = {"kernels": 0, "fallback_reason": reason, "backend": "eager"}
        self.num_kernels = 0

    def __call__(self, *args):
        return self.gm(*args)


def compile_fx(gm: torch.fx.GraphModule, example_inputs, options=None):
    """Compile an ATen-level FX graph (flat tensor inputs) into a Python callable.

    CPU graphs get C++/OpenMP kernels, CUDA graphs Triton kernels (see ``options.OPTIONS``
    for ``options``; ``validate_options`` checks them). A graph that mixes devices, or that
    neither backend can take, runs eagerly and says why in ``report["fallback_reason"]``.
    """
    opts = validate_options(options)
    from danlu_inductor.options import verify_ir_scope

    with verify_ir_scope(opts.verify_ir):  # ir/verify.py, run by the scheduler
        return _compile_fx(gm, example_inputs, opts)


def _compile_fx(gm, example_inputs, opts):
    move_cpu_scalars(gm, example_inputs)  # 0-dim CPU values of a CUDA graph, on its device
    fold_constants(gm)  # values that depend on no input: computed once, here
    backend, where = choose_backend(gm, example_inputs)
    if backend == "eager":
        log.warning("danlu_inductor: running the graph eagerly: %s", where)
        compiled = EagerGraph(gm, where)
    elif backend == "triton":
        from danlu_inductor.codegen.triton.compile import compile_triton

        compiled = compile_triton(gm, example_inputs, where, opts)
        if not isinstance(compiled, EagerGraph):
            _maybe_dump(compiled, gm)
    else:
        compiled = compile_fx_batch([(gm, example_inputs)])[0]
    if opts.cudagraphs:
        from danlu_inductor.cudagraphs import wrap_cudagraphs

        compiled = wrap_cudagraphs(compiled, gm, example_inputs)
    return compiled


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


def compile_fx_batch(items):
    """Compile several graphs with one C++ compiler run (the compiler's start-up dominates
    small graphs). Returns one callable per ``(gm, example_inputs)``."""
    prepared = []
    for gm, _ in items:
        fold_constants(gm)
    for i, (gm, example_inputs) in enumerate(items):
        prefix = f"g{i}_" if len(items) > 1 else ""
        prepared.append(_prepare(gm, example_inputs, prefix))
    names, sources, nargs, nsizes = [], [], {}, {}
    for p in prepared:
        if isinstance(p, tuple):
            w = p[2]
            names += w.kernel_names
            sources += w.kernel_sources
            nargs.update(w.kernel_nargs)
            nsizes.update(w.kernel_nsizes)
    t0 = time.perf_counter()
    fns, so_path, kernel_source = CppBackend().build(names, sources, nargs, nsizes)
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
            "fallback_reasons": dict(graph.fallback_reasons),
            "lowering_s": times[0],
            "codegen_s": times[1],
            "compile_s": build_s,
            "library": str(so_path) if so_path else None,
            "memory": list(wrapper.memory_log),
            "backend": "cpp",
            "dynamic": graph.is_dynamic,
        }
        if graph.fallbacks:
            log.info("danlu_inductor: fallback kernels: %s", dict(graph.fallbacks))
        own_source = "\n".join(wrapper.kernel_sources)
        compiled = CompiledGraph(
            call, graph.out_spec, wrapper.source, own_source, graph, scheduler, report
        )
        compiled.consts = wrapper.consts
        compiled.build = {  # what rebuilds it from the kernels' sources (artifacts.py)
            "names": list(wrapper.kernel_names),
            "sources": list(wrapper.kernel_sources),
            "nargs": {k: wrapper.kernel_nargs[k] for k in wrapper.kernel_names},
            "nsizes": {k: wrapper.kernel_nsizes[k] for k in wrapper.kernel_names},
        }
        _maybe_dump(compiled, gm)
        out.append(compiled)
    del kernel_source
    return out


def _prepare(gm, example_inputs, prefix):
    t0 = time.perf_counter()
    backend, where = choose_backend(gm, example_inputs)
    if backend != "cpp":
        if backend == "triton":
            return compile_fx(gm, example_inputs)
        log.warning("danlu_inductor: running the graph eagerly: %s", where)
        return EagerGraph(gm, where)
    try:
        channels_last = wants_channels_last(gm, torch.device("cpu"))
        graph = GraphLowering(gm, example_inputs, conv_channels_last=channels_last).run()
        t1 = time.perf_counter()
        with size_hints(graph.hint_values()):
            scheduler = Scheduler(graph)
            wrapper = WrapperCodegen(graph, scheduler, CppBackend(), kernel_prefix=prefix)
            wrapper.source = wrapper.generate()
    except NotLowered as e:
        # DynamicShapeUnsupported included: the graph (symbolic or not) runs as it is
        log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", e)
        return EagerGraph(gm, str(e))
    except (TypeError, NotImplementedError) as e:
        if "shape_env" not in gm.meta:
            raise
        # a symbolic size where code expects a number (a sympy comparison that cannot be
        # decided, an index function the printers lack): run the graph as it is
        reason = f"symbolic sizes: {type(e).__name__}: {e}"
        log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", reason)
        return EagerGraph(gm, reason)
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
    suffix = "py" if compiled.report.get("backend") == "triton" else "cpp"
    (d / f"kernels.{suffix}").write_text(compiled.kernel_source)
    log.info("danlu_inductor: wrote %s", d)
