"""The backend registry: names that `danlu.compile(backend=...)` accepts.

A backend is a callable `backend(gm, example_inputs) -> callable` (the convention torch's
backend registry also uses).
Built in: "eager" (capture only), "aot_eager" (capture + ahead-of-time autograd, graphs run
as they are) and "inductor" (capture + aotautograd + danlu-inductor's generated kernels).
Other packages add backends with `register_backend` or through the `danlu.backends` entry-point
group (each entry point names a backend callable, or a factory taking `mode` and `options`).
The names live in danlu-dynamo's registry (`danlu_dynamo.backends`), the one registry of the
packages: danlu's backends replace its plain "eager" there; this module checks modes and
options and loads the entry points before it looks a name up.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from importlib.metadata import entry_points

from danlu_dynamo import backends as _registry
from danlu_dynamo.backends import Backend, register_backend

from .debug import graph_table
from .inductor_options import check_mode
from .logs import fallbacks_log, graph_log, output_code_log
from .progress import phase
from .stats import CompileStats, active_graph

__all__ = ["Backend", "list_backends", "lookup_backend", "register_backend"]


def _load_entry_points() -> None:
    for ep in entry_points(group="danlu.backends"):
        if not _registry.is_registered(ep.name):
            register_backend(ep.name, ep.load())


def list_backends() -> list[str]:
    """Names of every registered backend."""
    _load_entry_points()
    return _registry.registered_names()


def lookup_backend(backend, mode=None, options=None) -> Backend:
    """Resolve a name or callable to a backend, validating mode and options."""
    check_mode(mode)
    if callable(backend):
        if mode not in (None, "default") or options:
            raise ValueError("mode and options apply to named backends only, not to a callable")
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, not {type(backend).__name__}")
    _load_entry_points()
    if not _registry.is_registered(backend):
        raise ValueError(
            f"unknown backend {backend!r}; valid backends: {', '.join(list_backends())}"
        )
    if backend != "inductor" and (mode not in (None, "default") or options):
        raise ValueError(f"mode and options are inductor settings; backend {backend!r} takes none")
    return _registry.lookup_backend(backend, mode=mode, options=options)


@register_backend("eager")
def _eager(mode=None, options=None):
    from danlu_dynamo.backends import eager

    return own_backend(eager)


@register_backend("aot_eager")
def _aot_eager(mode=None, options=None):
    from danlu_aotautograd import run_graph

    return aot_pipeline(lambda gm, inputs, **_: run_graph(gm, inputs), decompositions=None)


@register_backend("inductor")
def _inductor(mode=None, options=None):
    from danlu_inductor import decomposition_table
    from danlu_inductor.artifacts import graph_artifact, load_graph

    from .cache import CachedBackend
    from .inductor_options import resolve

    settings = resolve(mode, options)
    cache = CachedBackend("inductor", settings, load_graph, graph_artifact)
    return aot_pipeline(
        inductor_compiler(settings),
        decompositions=decomposition_table(),
        cache=cache,
        prepare=_start_gpu_build_workers,
    )


def _start_gpu_build_workers(gm, example_inputs) -> None:
    # a GPU graph's Triton build workers start during the autograd phase, not after it
    try:
        from danlu_inductor import start_build_workers
    except ImportError:  # an older danlu-inductor starts them when it lowers
        return
    start_build_workers(example_inputs)


def start_build_workers_for(model) -> None:
    """A module whose weights are on a GPU starts its Triton build workers when it is
    compiled: they take seconds to start (each imports torch), and the first call's capture
    and autograd phases then overlap that instead of the graph's kernel builds waiting."""
    for tensor in itertools.chain(model.parameters(), model.buffers()):
        if tensor.device.type == "cuda":
            _start_gpu_build_workers(None, [tensor])
            return
        if tensor.device.type != "meta":
            return  # the first weight off the GPU: not a GPU model (or not one device's)


_FOR_TORCH_COMPILE: dict[str, Backend] = {}


def _for_torch_compile(name: str) -> Backend:
    """danlu's backend ``name`` as torch's compiler calls it: recorded in `CompileStats` and,
    like under `danlu.compile`, a graph that fails to compile runs eagerly."""
    backend = _FOR_TORCH_COMPILE.get(name)
    if backend is None:
        backend = CompileStats.current().wrap_backend(lookup_backend(name), name)
        _FOR_TORCH_COMPILE[name] = backend
    return backend


def torch_compile_backend(gm, example_inputs):
    """The backend registered as ``danlu`` in the ``torch_dynamo_backends`` entry-point
    group (torch's own compiler finds it by that name): aotautograd and danlu-inductor."""
    return _for_torch_compile("inductor")(gm, example_inputs)


def torch_compile_aot_eager_backend(gm, example_inputs):
    """The backend registered as ``danlu_aot_eager``: aotautograd, graphs run as they
    are (for checking capture and autograd apart from code generation)."""
    return _for_torch_compile("aot_eager")(gm, example_inputs)


def own_backend(backend):
    """Mark a backend as danlu's: its unattributed time counts as "other", not as "backend
    compile" (which, for a foreign backend, is its whole call)."""

    def danlu_backend(gm, example_inputs):
        return backend(gm, example_inputs)

    danlu_backend.danlu_phases = True
    danlu_backend.__name__ = getattr(backend, "__name__", "backend")
    return danlu_backend


def aot_pipeline(graph_compiler, decompositions, cache=None, prepare=None):
    """capture graph -> danlu-aotautograd (joint trace, partition) -> `graph_compiler` for each
    ATen graph. The time aotautograd spends outside the graph compiler is the "autograd" phase;
    each ATen graph goes to the debug directory as it reaches the graph compiler. With
    ``cache`` (a `danlu.cache.CachedBackend`), a graph found in the graph cache is loaded
    instead, and one compiled here is stored. ``prepare(gm, example_inputs)``, when given,
    runs before a graph is compiled for real (not on a cache hit): work that can overlap the
    autograd phase starts there."""
    from danlu_aotautograd import aot_backend

    def backend(gm, example_inputs):
        from .cache import graph_store
        from .config import config

        # a debug directory asks for every artefact of the compile: compile for real
        use = cache is not None and not config.debug_dir
        store = graph_store() if use else None
        key_info = cache.key(gm, example_inputs) if store is not None else None
        if key_info is None:
            return compile_graph(gm, example_inputs)
        active = active_graph()
        record = active[0] if active is not None else None
        compiled_once: list = []

        def slow_path(*args):  # a call the loaded program does not serve: compile for real
            if not compiled_once:
                compiled_once.append(compile_graph(gm, example_inputs))
            return compiled_once[0](*args)

        runner, program = cache.load(store, key_info, gm, example_inputs, slow_path)
        if runner is not None:
            stats = CompileStats.current()
            for kind, graph in (("forward", program.forward), ("backward", program.backward)):
                if graph is not None:
                    label = f"{kind} graph" + (f" of graph {record.index}" if record else "")
                    kernels = stats.record_kernels(graph, f"{label} (graph cache)", record)
                    if record is not None:
                        record.kernels = (record.kernels or 0) + kernels.kernels
            if record is not None:
                record.cache = "hit"
            return runner
        compiled = compile_graph(gm, example_inputs)
        cache.save(store, key_info, compiled)
        if record is not None:
            record.cache = "miss"
        return compiled

    def compile_graph(gm, example_inputs):
        phase("autograd")
        if prepare is not None:
            prepare(gm, example_inputs)
        active = active_graph()
        record, dump = active if active is not None else (None, None)
        inner = [0.0]

        def wrap(kind):
            def compiler(aten_gm, aten_inputs):
                start = time.perf_counter()
                stem = dump.aten_graph(kind, aten_gm) if dump is not None else None
                label = f"{kind} graph" + (f" of graph {record.index}" if record else "")
                if graph_log.isEnabledFor(logging.INFO):
                    graph_log.info("%s (ATen):\n%s", label, graph_table(aten_gm))
                compiled = graph_compiler(aten_gm, aten_inputs, record=record, label=label)
                if dump is not None:
                    dump.inductor(stem, compiled)
                inner[0] += time.perf_counter() - start
                return compiled

            return compiler

        start = time.perf_counter()
        compiled = aot_backend(
            wrap("forward"),
            wrap("backward"),
            inference_compiler=wrap("inference"),
            decompositions=decompositions,
            guarded_inputs=True,  # danlu_dynamo's guards check every input's metadata
        )(gm, example_inputs)
        CompileStats.current().add_phase(
            "autograd", max(0.0, time.perf_counter() - start - inner[0]), record
        )
        return compiled

    backend.danlu_phases = True
    return backend


def inductor_compiler(settings: dict):
    """danlu-inductor as an ATen-graph compiler that records its lowering, codegen and C++
    compile times and kernel counts."""
    import danlu_inductor

    def compile_graph(gm, example_inputs, record=None, label="graph"):
        phase(f"inductor, {label}")
        stats = CompileStats.current()
        with _inductor_dump_off():
            if settings:
                compiled = danlu_inductor.compile_fx(gm, example_inputs, options=settings)
            else:
                compiled = danlu_inductor.compile_fx(gm, example_inputs)
        report = getattr(compiled, "report", None) or {}
        for key, name in (
            ("lowering_s", "lowering"),
            ("codegen_s", "codegen"),
            ("compile_s", "backend compile"),
        ):
            if isinstance(report.get(key), (int, float)):
                stats.add_phase(name, report[key], record)
        # what the report does not time (building the callable, or all of it if it reports
        # nothing) stays unattributed and is counted as "other" by the recording backend
        _log_output(label, compiled, report)
        kernels = stats.record_kernels(compiled, label, record)
        if record is not None:
            record.kernels = (record.kernels or 0) + kernels.kernels
            fallbacks = sum(kernels.fallback_ops.values())
            record.fallbacks = (record.fallbacks or 0) + fallbacks
        return compiled

    return compile_graph


def _log_output(label, compiled, report) -> None:
    """`output_code`: the generated kernels and wrapper; `fallbacks`: what runs in ATen."""
    if report.get("fallback_reason"):
        fallbacks_log.info("%s runs eagerly: %s", label, report["fallback_reason"])
    elif report.get("fallback_ops"):
        fallbacks_log.info("%s calls ATen for: %s", label, dict(report["fallback_ops"]))
    if output_code_log.isEnabledFor(logging.INFO):
        kernels = getattr(compiled, "kernel_source", None)
        wrapper = getattr(compiled, "wrapper_source", None)
        if kernels or wrapper:
            output_code_log.info(
                "%s: %d kernels\n%s\n%s", label, report.get("kernels", 0), kernels, wrapper
            )


@contextlib.contextmanager
def _inductor_dump_off():
    """danlu-inductor writes its own artefacts when DANLU_DEBUG_DIR is set; under
    danlu.compile the umbrella writes them (named forward/backward/inference, in the graph's
    folder), so inductor's own dump is switched off for the call."""
    saved = os.environ.pop("DANLU_DEBUG_DIR", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["DANLU_DEBUG_DIR"] = saved
