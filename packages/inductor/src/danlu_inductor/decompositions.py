"""The decomposition table the compiler traces with: danlu-primtorch's canonical table,
minus ops we lower better ourselves (one loop instead of a decomposed graph) and ops whose
library kernel beats what their decomposition lowers to."""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Lowered directly (see lowering/pooling.py): the window is unrolled into one loop body.
KEEP = {
    aten.max_pool2d_with_indices.default,
    aten.max_pool2d.default,
    # Decomposed, it is an accumulating index_put: ATen's kernel for that walks each run of
    # equal indices serially, and an embedding's backward is mostly repeats (T5's relative
    # position bias: 262144 indices into 32 rows took 21 ms on an H200). ATen's own
    # embedding backward sorts and reduces each run in parallel.
    aten.embedding_dense_backward.default,
}


def decomposition_table():
    from danlu_primtorch import decomposition_table as canonical

    table = canonical("canonical")
    for op in KEEP:
        table.pop(op, None)
    return table
