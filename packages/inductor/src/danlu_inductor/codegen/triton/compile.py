"""``compile_fx`` for graphs on a CUDA device: lowering, fusion, Triton kernels, wrapper.

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
from danlu_inductor.codegen.wrapper import WrapperCodegen
from danlu_inductor.graph import GraphLowering
from danlu_inductor.ir.symbols import size_hints
from danlu_inductor.lowering import NotLowered
from danlu_inductor.lowering.convolution import wants_channels_last
from danlu_inductor.passes import pad_matmuls
from danlu_inductor.runtime import FlagWatch
from danlu_inductor.scheduler import Scheduler

log = logging.getLogger("danlu_inductor")

MAX_RETRIES = 8


class KernelFailed(Exception):
    def __init__(self, kernel, origins, error):
        super().__init__(f"{kernel}: {error}")
        self.kernel, self.origins, self.error = kernel, list(origins), error


class KernelLaunchError(RuntimeError):
    """A generated kernel failed on its first launch (compilation on first use)."""


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


def compile_triton(gm, example_inputs, device: torch.device, opts):
    from danlu_inductor.compile_fx import CompiledGraph, EagerGraph

    forced: set[str] = set()
    failures: list[dict] = []
    padded = pad_matmuls(gm) if opts.pad_matmuls else 0
    channels_last = wants_channels_last(gm, device)
    for _ in range(MAX_RETRIES):
        t0 = time.perf_counter()
        try:
            graph = GraphLowering(
                gm,
                example_inputs,
                force_fallback=forced,
                for_gpu=True,
                conv_channels_last=channels_last,
            ).run()
        except NotLowered as e:
            log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", e)
            return EagerGraph(gm, str(e))
        t1 = time.perf_counter()
        try:
            with size_hints(graph.hint_values()):
                scheduler = Scheduler(graph)
        except NotLowered as e:
            log.warning("danlu_inductor: cannot compile this graph (%s); running it eagerly", e)
            return EagerGraph(gm, str(e))
        with size_hints(graph.hint_values()):
            backend = _GuardedBackend(autotune=opts.autotune, max_autotune=opts.max_autotune)
            # on a GPU the bounds flag is read after the call (FirstCallGuard) or the CUDA
            # graph replay, without stalling the host; in the interpreter, after each kernel
            defer = opts.cudagraphs or (device.type == "cuda" and not interpreting())
            wrapper = WrapperCodegen(
                graph, scheduler, backend, defer_index_checks=defer, descriptive_names=True
            )
            try:
                wrapper.source = wrapper.generate()
                t2 = time.perf_counter()
                fns, path, module_source = backend.build(
                    wrapper.kernel_names, wrapper.kernel_sources
                )
                failed = _precompile(backend, fns, path, wrapper, device)
            except KernelFailed as e:
                failed = {e.kernel: (e.origins, e.error)}
            except Exception as e:  # not tied to one group (e.g. the module fails to import)
                reason = f"Triton backend: {type(e).__name__}: {str(e)[:300]}"
                log.warning("danlu_inductor: running the graph eagerly: %s", reason)
                eager = EagerGraph(gm, reason)
                eager.report["triton_fallbacks"] = failures
                return eager
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
        log.warning("danlu_inductor: running the graph eagerly: %s", reason)
        eager = EagerGraph(gm, reason)
        eager.report["triton_fallbacks"] = failures
        return eager
    build_s = time.perf_counter() - t2
    consts = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in wrapper.consts.items()
    }
    namespace: dict = {}
    exec(compile(wrapper.source, "<danlu_inductor triton wrapper>", "exec"), namespace)
    call = namespace["make_call"](fns, consts, device)
    report = {
        "backend": "triton",
        "device": str(device),
        "kernels": len(wrapper.kernel_names),
        "kernel_kinds": {k: wrapper.artifacts[k].kind for k in wrapper.kernel_names},
        "extern_calls": sum(graph.externs.values()),
        "fallback_calls": sum(graph.fallbacks.values()),
        "fallback_ops": dict(graph.fallbacks),
        "fallback_reasons": dict(graph.fallback_reasons),
        "triton_fallbacks": failures,
        "padded_matmuls": padded,
        "lowering_s": t1 - t0,
        "codegen_s": t2 - t1,
        "compile_s": build_s,
        "library": str(path) if path else None,
        "memory": list(wrapper.memory_log),
        "dynamic": graph.is_dynamic,
    }
    target = check_target()
    ready = [n for n, fn in fns.items() if any(err is None for _, err, _ in fn.compile_info or ())]
    on_gpu = device.type == "cuda" and not interpreting()
    report["precompiled"] = {
        "target": f"sm_{target[1]}" if target else ("this GPU" if on_gpu else None),
        "kernels": len(ready),
    }
    if graph.fallbacks:
        log.info("danlu_inductor: fallback kernels: %s", dict(graph.fallbacks))
    guarded = FirstCallGuard(call, gm, report, check_err=defer and wrapper.uses_err)
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
    }
    return compiled


def _precompile(backend, fns, path, wrapper, device):
    """Compile the kernels in worker processes (GPU, or the test check target);
    -> {kernel: (origins, error)} for kernels that cannot compile."""
    target = check_target()
    on_gpu = device.type == "cuda" and not interpreting()
    if not fns or (target is None and not on_gpu):
        return {}
    dtypes = wrapper._dtypes()
    try:
        failed = backend.precompile(
            fns, path, dtypes, target=target, cuda_device=device.index if on_gpu else None
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


class FirstCallGuard:
    """Runs the wrapper's ``call``; if a Triton kernel fails on the first call (it compiles
    on first use when it was not compiled ahead), the graph runs eagerly from then on."""

    def __init__(self, call, gm, report, check_err=False):
        self.call = call
        self.gm = gm
        self.report = report
        self.first = True
        self.eager = False
        # the wrapper deferred its bounds checks (for CUDA graph capture): plain calls read
        # the flag here; a CUDA graph runner calls ``self.call`` and reads it after replay
        self.check_err = check_err
        self.flag_watch = None

    @property
    def err_flag(self):
        return self.call.err_flag

    def __call__(self, args):
        if self.eager:
            return list(_flat(self.gm(*args)))
        if not self.first:
            return self._checked(self.call(args))
        saved = list(args)
        try:
            out = self.call(args)
        except KernelLaunchError as e:
            if self.gm is None:  # loaded from an artifact: the caller falls back
                raise
            log.warning("danlu_inductor: %s; running the graph eagerly from now on", e)
            self.report["fallback_reason"] = str(e)
            self.eager = True
            return list(_flat(self.gm(*saved)))
        self.first = False
        return self._checked(out)

    def _checked(self, out):
        if self.check_err:
            if self.flag_watch is None:
                self.flag_watch = FlagWatch(self.call.err_flag)
                self.flag_watch.check_now()  # the first call reads it at once
            else:
                self.flag_watch.check()
        return out


def _flat(out):
    from torch.utils import _pytree as pytree

    return pytree.tree_leaves(out)
