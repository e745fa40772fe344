"""``inference_backend``: capture-level graphs -> ATen (danlu-primtorch) -> compile_fx."""

from __future__ import annotations

import logging

import torch
from torch.utils import _pytree as pytree

log = logging.getLogger("danlu_inductor")


def inference_backend(gm: torch.fx.GraphModule, example_inputs):
    """A ``backend(gm, example_inputs) -> callable`` for forward-only use.

    The graph is traced to canonical ATen with danlu-primtorch under ``no_grad`` and compiled.
    If an input requires grad while grad mode is on, compiling would drop gradients, so the
    graph runs eagerly instead (and says so once).
    """
    from danlu_inductor.compile_fx import compile_fx

    needs_grad = any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
    params_need_grad = any(p.requires_grad for p in gm.parameters())
    state = {"compiled": None, "eager_logged": False}

    def compiled_for(args):
        if state["compiled"] is None:
            from danlu_primtorch import decomposition_table, trace

            with torch.no_grad():
                aten_gm = trace(gm, *args, decompositions=decomposition_table("canonical"))
            flat = pytree.tree_leaves(list(args))
            state["compiled"] = compile_fx(aten_gm, flat)
            state["out_spec"] = None
        return state["compiled"]

    def run(*args):
        if torch.is_grad_enabled() and (
            needs_grad
            or params_need_grad
            or any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        ):
            if not state["eager_logged"]:
                log.warning(
                    "danlu_inductor.inference_backend: inputs require grad; running the graph "
                    "eagerly so gradients stay correct (use aotautograd for training)"
                )
                state["eager_logged"] = True
            return gm(*args)
        with torch.no_grad():
            compiled = compiled_for(args)
            return compiled(*pytree.tree_leaves(list(args)))

    run.backend_name = "danlu_inductor.inference"
    return run
