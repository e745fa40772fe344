"""The decomposition table the compiler traces with: danlu-primtorch's canonical table,
minus ops we lower better ourselves (one loop instead of a decomposed graph)."""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Lowered directly (see lowering/pooling.py): the window is unrolled into one loop body.
KEEP = {
    aten.max_pool2d_with_indices.default,
    aten.max_pool2d.default,
}


def decomposition_table():
    from danlu_primtorch import decomposition_table as canonical

    table = canonical("canonical")
    for op in KEEP:
        table.pop(op, None)
    return table
