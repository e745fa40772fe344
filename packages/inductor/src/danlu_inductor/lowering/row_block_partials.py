"""Column sums split by the row blocks of the row kernel beside them (GPU graphs).

A norm's backward reduces the same ``[rows, C]`` values two ways: along each row (the input's
gradient: a persistent row kernel, a few rows per program) and down each column (the weight's
and bias's gradients: a split reduction, partial sums over chunks of 256 rows, then a sum of
the partials). The column sum's first stage read its inputs again: on an H100 LLaMA's 17 norms
spent 0.72 ms in those first stages against 1.29 ms in their row kernels.

Here such a column sum is split into chunks of exactly the rows one program of the row kernel
holds (``row_block``: its XBLOCK, 4 rows of 1024). The first stage is then one more output of
the row kernel (the scheduler places it ``xsum``: each program sums its block of rows down the
columns, ``tl.sum(.., 0)``, and stores one row of partials), and only the short second stage
stays a kernel of its own. The column sum gets the small chunks only when the graph has a row
reduction over the same values (``_row_reduction_beside``); a column sum alone (batch-norm
statistics) keeps its long chunks, which read and write less when nothing shares the pass.
"""

from __future__ import annotations

import math

import torch

from danlu_inductor.codegen.triton.heuristics import (
    PERSISTENT_MAX_RNUMEL,
    persistent_rows_per_program,
)
from danlu_inductor.ir.symbols import hint, is_static, product

aten = torch.ops.aten

_ROW_REDUCTIONS = (aten.sum.dim_IntList, aten.mean.dim)
# ops the sibling search walks through: what fuses into the kernels on both sides
_TRANSPARENT = (
    aten._to_copy.default,
    aten.view.default,
    aten._unsafe_view.default,
    aten.expand.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
)
_SEARCH_DEPTH = 12


def column_sum_row_block(kept_sizes, red_sizes, node) -> int | None:
    """The chunk (rows) for the first stage of a column sum over ``red_sizes`` keeping
    ``kept_sizes``, or None where the usual split stays: sizes not static, kept values too
    many for a persistent row, rows not a multiple of the block, or no row reduction of the
    same values beside it in the FX graph."""
    if not all(is_static(s) for s in (*kept_sizes, *red_sizes)):
        return None
    n_row, rows = int(hint(product(kept_sizes))), int(hint(product(red_sizes)))
    if n_row > PERSISTENT_MAX_RNUMEL:
        return None
    # the persistent row kernel's own block, which the fused kernel then keeps fixed
    k = persistent_rows_per_program(rows, n_row)
    if k < 2 or rows % k or rows // k < 2:
        return None
    if not _row_reduction_beside(node):
        return None
    return k


def _shape(n):
    val = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _full_size_sources(start: torch.fx.Node, numel: int) -> set:
    """The full-size nodes a value is computed from through pointwise ops (and casts, views):
    what a kernel computing it would load, or compute on the way."""
    seen, out, frontier = {start}, set(), [start]
    for _ in range(_SEARCH_DEPTH):
        nxt = []
        for n in frontier:
            shape = _shape(n)
            if shape is not None and math.prod(shape) == numel:
                out.add(n)
            if n.op != "call_function":
                continue
            target = n.target
            pointwise = isinstance(target, torch._ops.OpOverload) and (
                torch.Tag.pointwise in target.tags or target in _TRANSPARENT
            )
            if not pointwise:
                continue
            for i in n.all_input_nodes:
                if i not in seen:
                    seen.add(i)
                    nxt.append(i)
        frontier = nxt
    return out


def _row_reduction_beside(node) -> bool:
    """Does the FX graph reduce, along its last dim only, a value computed from the same
    full-size values as ``node``'s input (``node``: the column sum being lowered)?"""
    if node is None or node.op != "call_function" or not node.args:
        return False
    src = node.args[0]
    shape = _shape(src)
    if shape is None or len(shape) < 2 or not all(isinstance(s, int) for s in shape):
        return False
    numel = math.prod(shape)
    mine = None
    for other in node.graph.nodes:
        if other is node or other.op != "call_function" or other.target not in _ROW_REDUCTIONS:
            continue
        if len(other.args) < 2 or _shape(other.args[0]) != shape:
            continue
        dims = other.args[1]
        dims = [dims] if isinstance(dims, int) else list(dims or ())
        if sorted(d % len(shape) for d in dims) != [len(shape) - 1]:
            continue
        if mine is None:
            mine = _full_size_sources(src, numel)
        if mine & _full_size_sources(other.args[0], numel):
            return True
    return False
