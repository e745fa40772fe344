"""``trace(fn, *args)``: one call from a Python function to an ATen-level GraphModule."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..fake import FakeTensor, FakeTensorMode
from ..symbolic import ShapeEnv
from ..symbolic.composites import SymbolicCompositeMode
from .cleanup import eliminate_dead_nodes
from .tracer import AtenTracer


def trace(
    fn,
    *args,
    decompositions: Mapping | None = None,
    fake: bool = True,
    tracer_class: type[AtenTracer] = AtenTracer,
    dynamic=False,
    shape_env: ShapeEnv | None = None,
) -> fx.GraphModule:
    """Trace ``fn(*args)`` into a GraphModule of ATen/prim ``OpOverload`` calls.

    Placeholders are the pytree leaves of ``args`` (call the result with
    ``gm(*torch.utils._pytree.tree_leaves(args))``); the output has ``fn``'s pytree structure.
    ``fake=True`` traces on fake tensors (real tensor inputs are converted; fake inputs are used
    as they are, in their own mode); ``fake=False`` runs the real kernels while recording.
    Non-tensor leaves become placeholders too, but their values are baked into the graph.
    ``decompositions`` (``OpOverload -> callable``) apply recursively while tracing.

    ``dynamic`` (fakes only): ``True`` makes every dim of every real tensor input symbolic
    (sizes 0/1 stay static); a sequence or dict (pytree-leaf index -> ``True`` / dims / None)
    chooses per input. Sources are the placeholder names (``arg0.size(0)``). Symbols live in
    ``shape_env`` (a new ``ShapeEnv`` if None), also ``gm.meta["shape_env"]``; fake inputs
    keep the sizes they have (symbolic ones included).
    """
    flat, in_spec = tree_flatten(args)
    fake_mode = None
    if dynamic and not fake:
        raise ValueError("trace(dynamic=...) needs fake=True (symbolic sizes live on fakes)")
    if fake:
        fake_mode = next((a.fake_mode for a in flat if isinstance(a, FakeTensor)), None)
        if fake_mode is None:
            env = shape_env if shape_env is not None else (ShapeEnv() if dynamic else None)
            fake_mode = FakeTensorMode(shape_env=env)
        elif dynamic and fake_mode.shape_env is None:
            raise ValueError("dynamic=... with fake inputs needs their mode to have a shape_env")
        plan = _dynamic_plan(dynamic, len(flat))
        flat = [
            fake_mode.from_real(a, dynamic_dims=plan[i], source=f"arg{i}")
            if isinstance(a, torch.Tensor)
            else a
            for i, a in enumerate(flat)
        ]
    tracer = tracer_class(fake_mode=fake_mode, decompositions=decompositions)
    for i, a in enumerate(flat):
        tracer.placeholder(a, f"arg{i}")
    with contextlib.ExitStack() as stack:
        stack.callback(tracer.close)
        if fake_mode is not None:
            stack.enter_context(fake_mode)
            if fake_mode.shape_env is not None:
                # matmul/linear composites that read concrete sizes (symbolic/composites.py)
                stack.enter_context(SymbolicCompositeMode())
        else:
            stack.enter_context(_no_autograd_threads())
        stack.enter_context(tracer)
        out = fn(*tree_unflatten(flat, in_spec))
    tracer.set_outputs(out)
    eliminate_dead_nodes(tracer.graph)
    gm = tracer.graph_module()
    gm.meta["in_spec"] = in_spec
    gm.meta["shape_env"] = fake_mode.shape_env if fake_mode is not None else None
    return gm


def _dynamic_plan(dynamic, n: int) -> list:
    if not dynamic:
        return [None] * n
    if dynamic is True:
        return [True] * n
    if isinstance(dynamic, Mapping):
        return [dynamic.get(i) for i in range(n)]
    plan = list(dynamic)
    if len(plan) != n:
        raise ValueError(f"dynamic has {len(plan)} entries for {n} inputs (pytree leaves)")
    return plan


@contextlib.contextmanager
def _no_autograd_threads():
    # Backward passes must run on this thread, where the tracer mode is active.
    prev = torch._C._is_multithreading_enabled()
    torch._C._set_multithreading_enabled(False)
    try:
        yield
    finally:
        torch._C._set_multithreading_enabled(prev)
