"""``trace(fn, *args)``: one call from a Python function to an ATen-level GraphModule."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..fake import FakeTensor, FakeTensorMode
from .cleanup import eliminate_dead_nodes
from .tracer import AtenTracer


def trace(
    fn,
    *args,
    decompositions: Mapping | None = None,
    fake: bool = True,
    tracer_class: type[AtenTracer] = AtenTracer,
) -> fx.GraphModule:
    """Trace ``fn(*args)`` into a GraphModule of ATen/prim ``OpOverload`` calls.

    Placeholders are the pytree leaves of ``args`` (call the result with
    ``gm(*torch.utils._pytree.tree_leaves(args))``); the output has ``fn``'s pytree structure.
    ``fake=True`` traces on fake tensors (real tensor inputs are converted; fake inputs are used
    as they are, in their own mode); ``fake=False`` runs the real kernels while recording.
    Non-tensor leaves become placeholders too, but their values are baked into the graph.
    ``decompositions`` (``OpOverload -> callable``) apply recursively while tracing.
    """
    flat, in_spec = tree_flatten(args)
    fake_mode = None
    if fake:
        fake_mode = next((a.fake_mode for a in flat if isinstance(a, FakeTensor)), None)
        fake_mode = fake_mode or FakeTensorMode()
        flat = [fake_mode.from_real(a) if isinstance(a, torch.Tensor) else a for a in flat]
    tracer = tracer_class(fake_mode=fake_mode, decompositions=decompositions)
    for i, a in enumerate(flat):
        tracer.placeholder(a, f"arg{i}")
    with contextlib.ExitStack() as stack:
        stack.callback(tracer.close)
        if fake_mode is not None:
            stack.enter_context(fake_mode)
        else:
            stack.enter_context(_no_autograd_threads())
        stack.enter_context(tracer)
        out = fn(*tree_unflatten(flat, in_spec))
    tracer.set_outputs(out)
    eliminate_dead_nodes(tracer.graph)
    gm = tracer.graph_module()
    gm.meta["in_spec"] = in_spec
    return gm


@contextlib.contextmanager
def _no_autograd_threads():
    # Backward passes must run on this thread, where the tracer mode is active.
    prev = torch._C._is_multithreading_enabled()
    torch._C._set_multithreading_enabled(False)
    try:
        yield
    finally:
        torch._C._set_multithreading_enabled(prev)
