"""Run ATen ops through a decomposition table, eagerly, and record what is left.

This is the checker's engine, not the tracer: it applies a table recursively on real tensors
(each decomposed op re-enters the mode, so a decomposition that produces another decomposable
op is decomposed too) and records every op that reached a kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class DecomposeMode(TorchDispatchMode):
    """Applies ``table`` recursively; ``leaves`` collects the ops that ran as kernels."""

    def __init__(self, table: dict[torch._ops.OpOverload, Callable]):
        super().__init__()
        self.table = table
        self.leaves: set[torch._ops.OpOverload] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fn = self.table.get(func)
        if fn is not None:
            with self:  # the mode is popped while we are in here; re-enter it for the decomposition
                out = fn(*args, **kwargs)
            if out is not NotImplemented:  # NotImplemented: "keep the op for these arguments"
                return out
        self.leaves.add(func)
        return func(*args, **kwargs)


def run_decomposed(
    op: torch._ops.OpOverload,
    table: dict[torch._ops.OpOverload, Callable],
    *args,
    **kwargs,
):
    """``op(*args, **kwargs)`` computed through ``table``; returns (result, ops that ran)."""
    mode = DecomposeMode(table)
    with mode:
        out = op(*args, **kwargs)
    return out, mode.leaves
