"""The Triton path: lower, schedule, generate and compile a graph for one device, retrying
with ATen fallbacks.

A kernel that cannot be generated or compiled never gives a wrong answer: the FX nodes
fused into its group are lowered again as ATen fallback kernels (the rest of the graph
stays compiled), and the graph runs eagerly only when that does not help. Every such step
is logged and listed in ``report["triton_fallbacks"]``.
"""

from __future__ import annotations

import logging
import os
import time

import torch

from danlu_inductor.codegen.triton.backend import TritonBackend, interpreting
from danlu_inductor.lowering import NotLowered
from danlu_inductor.lowering.convolution import wants_channels_last
from danlu_inductor.options import validate_options
from danlu_inductor.passes import fold_one_hot_sums, pad_matmuls
from danlu_inductor.pipeline.compiled import CompiledGraph, EagerGraph, FirstCallGuard
from danlu_inductor.pipeline.report import graph_report
from danlu_inductor.pipeline.steps import (
    generate_wrapper,
    load_call,
    log_fallback_kernels,
    lower,
    run_eagerly,
    schedule,
)

log = logging.getLogger("danlu_inductor")

MAX_RETRIES = 8


class KernelFailed(Exception):
    def __init__(self, kernel, origins, error):
        super().__init__(f"{kernel}: {error}")
        self.kernel, self.origins, self.error = kernel, list(origins), error


class _GuardedBackend(TritonBackend):
    """Turns a codegen error for a group into ``KernelFailed`` naming the group's FX nodes."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.current_origins: list[str] = []

    def make_kernel(self, group, name, buffer_dtypes, local_buffers):
        try:
            return super().make_kernel(group, name, buffer_dtypes, local_buffers)
        except Exception as e:
            origins = []
            for n in group.nodes:
                origins += [o for o in n.node.origins if o not in origins]
            raise KernelFailed(name, origins, f"codegen: {type(e).__name__}: {e}") from e


def check_target():
    """Internal, for tests: ``DANLU_INDUCTOR_TRITON_CHECK_TARGET=90`` compiles every kernel
    ahead of time for sm_90 at compile time (in the worker processes, no GPU needed); a
    kernel that fails takes the fallback path like a GPU compile failure would."""
    arch = os.environ.get("DANLU_INDUCTOR_TRITON_CHECK_TARGET")
    return ("cuda", int(arch), 32) if arch else None


def compile_fx_triton(gm, example_inputs, options=None):
    """The Triton path of ``compile_fx`` whatever the inputs' device -> CompiledGraph
    (``.artifacts``, ``.launchers``, ``.wrapper_source``, ...).

    For tests: CPU tensors under ``TRITON_INTERPRET=1`` run the same wrapper and kernels a
    CUDA graph gets (``compile_fx`` itself takes this path for CPU graphs only with
    ``DANLU_INDUCTOR_TRITON_ON_CPU=1``)."""
    opts = validate_options(options)
    fold_one_hot_sums(gm)  # as compile_fx does
    return compile_triton(gm, list(example_inputs), _device_of(example_inputs), opts)


def start_build_workers(example_inputs) -> bool:
    """Start the Triton build workers now if the graph's tensors are on a CUDA device.

    A worker takes seconds to start (it imports torch and Triton and opens the device), and
    a cold compile's first kernel builds waited for them: about 5 s of each first graph's
    build time on the H200 was the pool starting while the graph lowered. A caller that
    knows early that a GPU graph is coming (the umbrella backend, before its autograd
    phase) calls this so that the workers start during that phase. Returns whether a start
    was asked for; nothing here raises."""
    try:
        device = _device_of(example_inputs)
    except ValueError:
        return False
    return _warm_up(device)


def _warm_up(device) -> bool:
    if device.type != "cuda" or interpreting():
        return False
    from danlu_inductor.codegen.triton import precompile

    try:
        precompile.warm_up(cuda_device=device.index)
    except Exception as e:  # no pool now: _precompile tries again, or builds at launch
        log.warning("danlu_inductor: Triton build workers did not start early: %s", e)
        return False
    return True


def _device_of(example_inputs) -> torch.device:
    devices = {a.device for a in example_inputs if isinstance(a, torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"inputs on several devices: {sorted(map(str, devices))}")
    return devices.pop() if devices else torch.device("cpu")


def compile_triton(gm, example_inputs, device: torch.device, opts) -> CompiledGraph | EagerGraph:
    """Compile ``gm`` for ``device``; FX nodes whose kernels fail are retried as ATen
    fallbacks (at most ``MAX_RETRIES`` rounds), else the graph runs eagerly."""
    forced: set[str] = set()
    failures: list[dict] = []
    padded = pad_matmuls(gm, opts.split_unaligned_columns) if opts.pad_matmuls else 0
    channels_last = wants_channels_last(gm, device)
    # on a GPU the bounds flag is read after the call (FirstCallGuard) or the CUDA graph
    # replay, without stalling the host; in the interpreter, after each kernel
    defer = opts.cudagraphs or (device.type == "cuda" and not interpreting())
    _warm_up(device)  # workers start while this graph lowers (if not started earlier)
    for _ in range(MAX_RETRIES):
        t0 = time.perf_counter()
        try:
            graph = lower(
                gm,
                example_inputs,
                channels_last,
                force_fallback=forced,
                for_gpu=True,
                row_block_partials=opts.row_block_partials,
            )
        except NotLowered as e:
            return run_eagerly(gm, str(e), cannot_lower=True)
        t1 = time.perf_counter()
        try:
            scheduler = schedule(graph)
        except NotLowered as e:
            return run_eagerly(gm, str(e), cannot_lower=True)
        backend = _GuardedBackend(autotune=opts.autotune, max_autotune=opts.max_autotune)
        build_stats: dict = {}  # what this round's kernel builds took (the graph report)
        try:
            wrapper = generate_wrapper(
                graph,
                scheduler,
                backend,
                defer_index_checks=defer,
                descriptive_names=True,
                group_input_kernels=opts.group_input_kernels,
            )
            t2 = time.perf_counter()
            fns, path, module_source = backend.build(wrapper.kernel_names, wrapper.kernel_sources)
            failed = _precompile(backend, fns, path, wrapper, device, build_stats)
        except KernelFailed as e:
            failed = {e.kernel: (e.origins, e.error)}
        except Exception as e:  # not tied to one group (e.g. the module fails to import)
            reason = f"Triton backend: {type(e).__name__}: {str(e)[:300]}"
            return run_eagerly(gm, reason, triton_fallbacks=failures)
        if not failed:
            break
        new = set()
        for kernel, (origins, error) in failed.items():
            failures.append({"kernel": kernel, "nodes": origins, "error": error[:500]})
            log.warning(
                "danlu_inductor: Triton kernel %s failed (%s); its FX nodes %s run as ATen "
                "fallbacks",
                kernel,
                error[:200],
                origins,
            )
            new |= set(origins) - forced
        if not new:
            break
        forced |= new
    else:
        failed = True
    if failed:
        reason = f"Triton kernels failed even with ATen fallbacks: {failures[-1]}"
        return run_eagerly(gm, reason, triton_fallbacks=failures)
    build_s = time.perf_counter() - t2
    consts = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in wrapper.consts.items()
    }
    call = load_call(wrapper.source, "<danlu_inductor triton wrapper>", fns, consts, device)
    target = check_target()
    ready = [n for n, fn in fns.items() if any(err is None for _, err, _ in fn.compile_info or ())]
    on_gpu = device.type == "cuda" and not interpreting()
    report = graph_report(
        "triton",
        graph,
        wrapper,
        (t1 - t0, t2 - t1, build_s),
        path,
        device=str(device),
        kernel_kinds={k: wrapper.artifacts[k].kind for k in wrapper.kernel_names},
        triton_fallbacks=failures,
        padded_matmuls=padded,
        precompiled={
            "target": f"sm_{target[1]}" if target else ("this GPU" if on_gpu else None),
            "kernels": len(ready),
            **build_stats,
        },
    )
    log_fallback_kernels(graph)
    guarded = FirstCallGuard(
        call,
        gm,
        report,
        check_err=defer and wrapper.uses_err,
        output_layouts=graph.output_layouts,
        written=wrapper.written_inputs,
    )
    compiled = CompiledGraph(
        guarded, graph.out_spec, wrapper.source, module_source, graph, scheduler, report
    )
    compiled.artifacts = [wrapper.artifacts[k] for k in wrapper.kernel_names]
    compiled.launchers = fns
    compiled.consts = consts  # what make_call got (constants on the device)
    compiled.err_flag = call.err_flag if wrapper.uses_err else None
    compiled.build = {  # what rebuilds it from the kernels' sources (artifacts.py)
        "names": list(wrapper.kernel_names),
        "sources": list(wrapper.kernel_sources),
        "device": str(device),
        "check_err": bool(defer and wrapper.uses_err),
        "written_inputs": list(wrapper.written_inputs),
    }
    return compiled


def _precompile(backend, fns, path, wrapper, device, stats):
    """Compile the kernels in worker processes (GPU, or the test check target);
    -> {kernel: (origins, error)} for kernels that cannot compile. ``stats`` receives what
    the builds took."""
    target = check_target()
    on_gpu = device.type == "cuda" and not interpreting()
    if not fns or (target is None and not on_gpu):
        return {}
    dtypes = wrapper._dtypes()
    try:
        failed = backend.precompile(
            fns,
            path,
            dtypes,
            target=target,
            cuda_device=device.index if on_gpu else None,
            stats=stats,
        )
    except Exception as e:  # the pool itself broke (a worker died): compile on first launch
        if target is not None:
            raise
        log.warning(
            "danlu_inductor: parallel Triton compile failed (%s); kernels compile on first launch",
            e,
        )
        return {}
    return {k: (wrapper.kernel_origins[k], f"compile: {err}") for k, err in failed.items()}
