"""What ``compile_fx`` returns: a compiled graph with every artefact kept for inspection, the
eager stand-in for a graph that could not be compiled, and the first-call guard of Triton
graphs (their kernels may compile, and fail, on first launch)."""

from __future__ import annotations

import logging
import time

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.pipeline.report import eager_report
from danlu_inductor.runtime import FlagWatch, KernelLaunchError, ensure_layout

log = logging.getLogger("danlu_inductor")


class CompiledGraph:
    """The callable ``compile_fx`` returns; keeps every artefact for inspection."""

    def __init__(self, call, out_spec, wrapper_source, kernel_source, graph, scheduler, report):
        self._call = call
        self.out_spec = out_spec
        # a flat tuple of outputs (what a graph returns, almost always) needs no unflatten:
        # ResNet-50's training step spent ~600 pytree calls a step there
        self._flat_tuple = out_spec == pytree.tree_flatten((0,) * out_spec.num_leaves)[1]
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
        if self._flat_tuple:
            return tuple(flat)
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

    def __init__(self, gm, reason, **report_entries):
        self.gm = gm
        self.reason = reason
        self.report = eager_report(reason, **report_entries)
        self.num_kernels = 0

    def __call__(self, *args):
        return self.gm(*args)


class FirstCallGuard:
    """Runs the wrapper's ``call``; if a Triton kernel fails on the first call (it compiles
    on first use when it was not compiled ahead), the graph runs eagerly from then on."""

    def __init__(self, call, gm, report, check_err=False, output_layouts=None, written=()):
        self.call = call
        self.gm = gm
        self.report = report
        # positions of the inputs the wrapper computes new values into: the first call keeps
        # their old values, so a kernel failing after some of them were written leaves the
        # caller's state (batch norm's running statistics) as it was for the eager rerun
        self.written = tuple(written)
        # per flat output, the (sizes, strides) the compiled code returns it with, or None:
        # an eager fallback keeps them, since a backward compiled for the saved values'
        # layouts reads them without checking (aotautograd's per-input layout promise)
        self.output_layouts = output_layouts
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
            return self._eager(args)
        if not self.first:
            return self._checked(self.call(args))
        saved = list(args)
        before = [(saved[i], saved[i].clone()) for i in self.written if i < len(saved)]
        start = time.perf_counter()
        try:
            out = self.call(args)
        except KernelLaunchError as e:
            with torch.no_grad():
                for t, old in before:
                    t.copy_(old)
            if self.gm is None:  # loaded from an artifact: the caller falls back
                raise
            log.warning("danlu_inductor: %s; running the graph eagerly from now on", e)
            self.report["fallback_reason"] = str(e)
            self.eager = True
            return self._eager(saved)
        self.first = False
        out = self._checked(out)
        # the first call's own time: on a GPU, the kernels' first launches (loading each
        # binary, timing the candidate configs); a compile report counts it apart from the
        # compile phases
        self.report["first_run_s"] = round(time.perf_counter() - start, 3)
        return out

    def _eager(self, args):
        out = list(pytree.tree_leaves(self.gm(*args)))
        if self.output_layouts is None:
            return out
        return [
            ensure_layout(o, *lay) if lay is not None and isinstance(o, torch.Tensor) else o
            for o, lay in zip(out, self.output_layouts)
        ]

    def _checked(self, out):
        if self.check_err:
            if self.flag_watch is None:
                self.flag_watch = FlagWatch(self.call.err_flag)
                self.flag_watch.check_now()  # the first call reads it at once
            else:
                self.flag_watch.check()
        return out
