"""``inference_backend``: capture-level graphs -> ATen (danlu-primtorch) -> compile_fx."""

from __future__ import annotations

import logging

import torch
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils import _pytree as pytree

from danlu_inductor.pipeline.driver import compile_fx

log = logging.getLogger("danlu_inductor")


def inference_backend(gm: torch.nn.Module, example_inputs):
    """A ``backend(gm, example_inputs) -> callable`` for forward-only use.

    The module's parameters and buffers become graph inputs (read at every call, so updates
    to them are seen), the graph is traced to canonical ATen with danlu-primtorch under
    ``no_grad`` and compiled with ``compile_fx``. If anything requires grad while grad mode is
    on, compiling would drop gradients, so the graph runs eagerly instead (logged once).
    """
    state = {"compiled": None, "eager_logged": False, "spec": None}
    names = [n for n, _ in gm.named_parameters()] + [n for n, _ in gm.named_buffers()]

    def current_state():
        return [t for _, t in gm.named_parameters()] + [t for _, t in gm.named_buffers()]

    def lifted(*flat):
        tensors, args = flat[: len(names)], flat[len(names) :]
        args = pytree.tree_unflatten(list(args), state["spec"])
        with _reparametrize_module(gm, dict(zip(names, tensors))):
            return gm(*args)

    def compile_for(args):
        from danlu_inductor.decompositions import decomposition_table
        from danlu_primtorch import trace
        from danlu_primtorch.tracing.tracer import TracingError

        flat_args, state["spec"] = pytree.tree_flatten(list(args))
        inputs = [t.detach() for t in current_state()] + flat_args
        try:
            aten_gm = trace(lifted, *inputs, decompositions=decomposition_table())
        except TracingError as e:
            log.warning("danlu_inductor.inference_backend: running the graph eagerly: %s", e)
            state["compiled"] = lambda *flat: lifted(*flat)
            return
        state["compiled"] = compile_fx(aten_gm, inputs)

    def run(*args):
        wants_grad = torch.is_grad_enabled() and (
            any(t.requires_grad for t in current_state())
            or any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves(args)
            )
        )
        if wants_grad:
            if not state["eager_logged"]:
                log.warning(
                    "danlu_inductor.inference_backend: inputs require grad; running the graph "
                    "eagerly so gradients stay correct (use aotautograd for training)"
                )
                state["eager_logged"] = True
            return gm(*args)
        with torch.no_grad():
            if state["compiled"] is None:
                compile_for(args)
            flat = [t.detach() for t in current_state()] + pytree.tree_leaves(list(args))
            return state["compiled"](*flat)

    run.backend_name = "danlu_inductor.inference"
    run.compiled = lambda: state["compiled"]
    return run
