"""The gradient of a small embedding table as a masked sum, on GPU graphs.

``embedding_dense_backward`` is kept as an ATen op (``decompositions.KEEP``): decomposed, it is
an accumulating ``index_put``, which ATen runs serially over runs of equal indices. ATen's own
kernel sorts the indices and reduces each run: a dozen launches and a few sorts, whatever the
table's size. For a table of a few rows (T5's relative-position buckets: 32 rows, 262144
positions; BERT's two token types) each row's gradient is a plain reduction instead:
``grad_weight[w, d] = sum over positions p of (indices[p] == w) * grad[p, d]``, which reads
the gradient once per row: one or two generated kernels (split when long), no sort. Larger
tables keep ATen's kernel, as do the CPU's graphs.

The table's row is the fastest index of the partial sums (``[chunk, column, row]``): the
programs next to each other then read the same gradient elements, which the cache serves, and
the gradient comes from memory about once instead of once per row. Row-major partials made
T5's relative-position gradient (32 rows, six layers' 8 x 1024 x 1024 float32 gradients) read
32 times: 0.47 ms a call on an H100.
"""

from __future__ import annotations

import torch

from danlu_inductor.ir.nodes import Pointwise, Reduction, StorageBox, current_graph
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import is_static, product
from danlu_inductor.lowering.reductions import _splits, realized, reduce, split_first_stage
from danlu_inductor.lowering.registry import NotLowered, aten, compute_dtype, register

MAX_ROWS = 64
# rows x gradient elements read: past this, ATen's sort costs less than reading the gradient
# once per row
MAX_READS = 1 << 28


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    gsize, isize = list(grad.get_size()), list(indices.get_size())
    if (
        not current_graph().for_gpu
        or scale_grad_by_freq
        or indices.get_dtype() not in (torch.int64, torch.int32)
        or not isinstance(num_weights, int)
        or num_weights > MAX_ROWS
        or len(gsize) != len(isize) + 1
        or not all(is_static(s) for s in gsize)
        or num_weights * int(product(gsize)) > MAX_READS
    ):
        raise NotLowered("embedding gradient of a large table (ATen's sorting kernel)")
    dtype = grad.get_dtype()
    c = compute_dtype(dtype)
    gload, iload = grad.make_loader(), indices.make_loader()
    npos = len(isize)

    def masked(index):  # [column, row, *position]
        col, row, pos = index[0], index[1], index[2:]
        hit = ops.eq(ops.to_dtype(iload(pos), torch.int64), ops.index_expr(row, torch.int64))
        if padding_idx >= 0:  # the padding row gets no gradient
            keep = ops.ne(ops.index_expr(row, torch.int64), ops.constant(padding_idx, torch.int64))
            hit = ops.logical_and(hit, keep)
        g = gload([*pos, col])
        return ops.where(hit, ops.to_dtype(g, c), ops.constant(0.0, c))

    width = gsize[-1]
    splits = _splits([width, num_weights], isize, "sum")
    if splits == 1:
        each = StorageBox(
            Pointwise(c, [num_weights, width, *isize], lambda i: masked([i[1], i[0], *i[2:]]))
        )
        return reduce(each, list(range(2, 2 + npos)), "sum", dtype, c)

    def inner(index, rindex):
        return masked([*index, *rindex])

    # partials [chunk, column, row]: the row is the fastest index
    second, red = split_first_stage(inner, [width, num_weights], isize, "sum", c, splits, True)
    return realized(
        Reduction(dtype, [num_weights, width], red, "sum", lambda i, r: second([i[1], i[0]], r), c)
    )
