"""Softmax, log-softmax and logsumexp.

A row's softmax needs its max ``m`` and ``s = sum(exp(x - m))``. Written as two reductions,
a row too long for one block of a GPU kernel is read three times: once for the max, once
for the sum, once for the normalized store. On GPU graphs such rows use one *online* pass
for both (reduction types ``softmax_max`` and ``softmax_sum``, which share one accumulator):
each lane keeps a running max and a sum rescaled by ``exp(old max - new max)`` whenever the
max grows, and the lanes' pairs combine the same way. Rows then are read twice. A row split
into chunks (few long rows, GPU graphs) gets a (max, sum) pair per chunk, and the chunks'
pairs combine in the second stage.

Rows of -inf only have max -inf; the accumulators then shift by 0 instead, so the sum stays
0 instead of NaN (exp(-inf - -inf)), and the result is eager's NaN (0/0). A +inf or NaN in a
row makes the row NaN, as eager's does.
"""

from __future__ import annotations

import torch

from danlu_inductor.ir.nodes import Reduction, StorageBox, current_graph
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import hint, product
from danlu_inductor.lowering.reductions import (
    _dims,
    keep_dims,
    realized,
    reduce,
    reduction_body,
    split_count,
    split_first_stage,
)
from danlu_inductor.lowering.registry import (
    NotLowered,
    aten,
    compute_dtype,
    make_pointwise,
    normalize_dim,
    register,
    to_dtype,
)

# Rows longer than this use the online pass. Measured on an H200 (triton 3.6, best config
# of each): rows of 4096 float32 ran faster as two reductions (37 us against 45 for 4096
# rows; the second read of a 16 KB row hits the L2 cache, and the online update's second exp
# costs more), vocabulary rows faster online (bf16 4096 x 50257: 489 us against 617).
ONLINE_MIN_ROW = 16384


def _finite_shift(m, c):
    """The shift applied with max ``m``: ``m``, or 0 where ``m`` is -inf."""
    return ops.where(ops.eq(m, ops.constant(float("-inf"), c)), ops.constant(0.0, c), m)


def _online_stats(xc, dim, c):
    """Row max and sum of exp(x - max) over ``dim`` (kept as size 1), in one pass."""
    inner, kept, red = reduction_body(xc, [dim], c)
    splits, chunk_major = split_count(inner, kept, red, "max")
    if splits == 1:
        m = realized(Reduction(c, kept, red, "softmax_max", inner, c))
        s = realized(Reduction(c, kept, red, "softmax_sum", inner, c))
        return keep_dims(m, [dim]), keep_dims(s, [dim])
    m_part, red2 = split_first_stage(inner, kept, red, "softmax_max", c, splits, chunk_major)
    s_part, _ = split_first_stage(inner, kept, red, "softmax_sum", c, splits, chunk_major)
    m = realized(Reduction(c, kept, red2, "max", m_part, c))
    m_of = m.make_loader()

    def rescaled(index, rindex):
        shift = ops.sub(m_part(index, rindex), _finite_shift(m_of(index), c))
        return ops.mul(s_part(index, rindex), ops.exp(shift))

    s = realized(Reduction(c, kept, red2, "sum", rescaled, c))
    return keep_dims(m, [dim]), keep_dims(s, [dim])


def _stats(x, dim, out_dtype, keep_exp=False):
    """``(compute dtype, x in it, row max, row sum of exp(x - max), exp(x - max) or None)``,
    or None for a 0-d x. ``keep_exp``: exp(x - max) is read twice (the sum, then the
    normalizing store); on the CPU it is realized, which the fused kernel keeps as a
    per-thread scratch row instead of computing exp twice (GPU kernels recompute it)."""
    c = compute_dtype(out_dtype)
    xc = to_dtype(x, c) if x.get_dtype() != c else x
    size = x.get_size()
    if len(size) == 0:
        return None
    dim = normalize_dim(dim, len(size))
    if current_graph().for_gpu and hint(product([size[dim]])) > ONLINE_MIN_ROW:
        return (c, xc, *_online_stats(xc, dim, c), None)
    m = reduce(xc, [dim], "max", c, c, keepdim=True)
    # max of an all -inf row is -inf; eager then yields NaN for softmax too (exp(nan)).
    e = make_pointwise([xc, m], lambda v, mm: ops.exp(ops.sub(v, mm)), c, c)
    if keep_exp and not current_graph().for_gpu and isinstance(e, StorageBox):
        e.realize()
    s = reduce(e, [dim], "sum", c, c, keepdim=True)
    return c, xc, m, s, e


@register(aten._softmax.default)
def softmax(x, dim, half_to_float=False):
    out_dtype = torch.float32 if half_to_float else x.get_dtype()
    if not out_dtype.is_floating_point:
        raise NotLowered("softmax of integers")
    stats = _stats(x, dim, out_dtype, keep_exp=True)
    if stats is None:
        return make_pointwise([x], lambda v: ops.constant(1.0, compute_dtype(out_dtype)), out_dtype)
    c, xc, m, s, e = stats
    if e is not None:
        return make_pointwise([e, s], ops.truediv, out_dtype, c)
    return make_pointwise(
        [xc, m, s], lambda v, mm, ss: ops.truediv(ops.exp(ops.sub(v, mm)), ss), out_dtype, c
    )


@register(aten._log_softmax.default)
def log_softmax(x, dim, half_to_float=False):
    out_dtype = torch.float32 if half_to_float else x.get_dtype()
    if not out_dtype.is_floating_point:
        raise NotLowered("log_softmax of integers")
    stats = _stats(x, dim, out_dtype)
    if stats is None:
        return make_pointwise([x], lambda v: ops.constant(0.0, compute_dtype(out_dtype)), out_dtype)
    c, xc, m, s, _ = stats
    return make_pointwise(
        [xc, m, s], lambda v, mm, ss: ops.sub(ops.sub(v, mm), ops.log(ss)), out_dtype, c
    )


@register(aten.logsumexp.default)
def logsumexp(x, dim, keepdim=False):
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowered("logsumexp of integers")
    c = compute_dtype(dtype)
    dims = _dims(x, dim)
    size = x.get_size()
    if (
        current_graph().for_gpu
        and len(dims) == 1
        and hint(product([size[dims[0]]])) > ONLINE_MIN_ROW
    ):
        # a vocabulary-sized row (the training graph's log-softmax normalizer): one pass
        xc = to_dtype(x, c) if dtype != c else x
        m, s = _online_stats(xc, dims[0], c)
        inf = float("inf")

        def finish_online(ss, mm):
            # a row holding +inf: eager's logsumexp is +inf (the online sum is nan there)
            lse = ops.add(ops.log(ss), _finite_shift(mm, c))
            return ops.where(ops.eq(mm, ops.constant(inf, c)), ops.constant(inf, c), lse)

        out = make_pointwise([s, m], finish_online, dtype, c)
    else:
        m = reduce(x, dims, "max", c, c, keepdim=True)

        def shifted_exp(v, mm):
            # rows of -inf: keep them -inf instead of nan (eager does the same)
            safe = ops.where(ops.isinf(mm), ops.constant(0.0, c), mm)
            return ops.exp(ops.sub(v, safe))

        e = make_pointwise([x, m], shifted_exp, c, c)
        s = reduce(e, dims, "sum", c, c, keepdim=True)

        def finish(ss, mm):
            safe = ops.where(ops.isinf(mm), ops.constant(0.0, c), mm)
            return ops.add(ops.log(ss), safe)

        out = make_pointwise([s, m], finish, dtype, c)
    if not keepdim:
        from danlu_inductor.lowering.views import squeeze

        out = squeeze(out, dims)
    return out
