"""Pooling: the window unrolled into one pointwise body (windows are small)."""

from __future__ import annotations

import operator

import sympy
import torch

from danlu_inductor.ir.nodes import Pointwise, StorageBox, current_graph
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import Clamp, to_int
from danlu_inductor.lowering.registry import NotLowered, aten, compute_dtype, register


def _indices_used(node) -> bool:
    """Whether the FX node's second output (the argmax indices) is read."""
    if node is None:
        return True
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            return True
    return False


def _pair(v):
    return list(v) * 2 if len(v) == 1 else list(v)


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    graph = current_graph()
    if not graph.for_gpu and _indices_used(graph.current_node):
        # the index selects keep GCC from vectorizing the window loop (ResNet-18's stem
        # pooling in training: 12 ms a step against ATen's 6 ms on 2 cores); the values
        # alone (inference) vectorize and stay generated
        raise NotLowered("max pooling with indices on the CPU: ATen's kernel is vectorized")
    return _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)


def _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    size = list(x.get_size())
    dtype = x.get_dtype()
    if len(size) not in (3, 4) or not dtype.is_floating_point:
        raise NotLowered("max_pool2d variant")
    kh, kw = _pair(list(kernel_size))
    sh, sw = _pair(list(stride)) if stride else (kh, kw)
    ph, pw = _pair([padding] if isinstance(padding, int) else list(padding))
    dh, dw = _pair([dilation] if isinstance(dilation, int) else list(dilation))
    if kh * kw > 64:
        raise NotLowered("large pooling window")
    h, w = to_int(size[-2]), to_int(size[-1])

    def out_len(n, k, s, p, d):
        num = n + 2 * p - d * (k - 1) - 1
        o = (-(-num // s) if ceil_mode else num // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        return o

    oh, ow = out_len(h, kh, sh, ph, dh), out_len(w, kw, sw, pw, dw)
    out_size = size[:-2] + [sympy.Integer(oh), sympy.Integer(ow)]
    load = x.make_loader()
    c = compute_dtype(dtype)

    # Undilated, with at most half a window of padding (eager's own limit): a window is a
    # range of rows (columns) that overlaps the input, so a padded position's clamped load
    # reads an element of the same window. For the maximum alone that needs no -inf select
    # (whose `and` of bounds tests keeps GCC from vectorizing the loop).
    clamped_in_window = dh == 1 and dw == 1 and 2 * ph <= kh and 2 * pw <= kw

    def window(index, with_index=True):
        *lead, i, j = index
        best = best_idx = None
        for a in range(kh):
            for b in range(kw):
                hi = i * sh - ph + a * dh
                wi = j * sw - pw + b * dw
                v = load([*lead, Clamp(hi, 0, h - 1), Clamp(wi, 0, w - 1)])
                if c != dtype:
                    v = ops.to_dtype(v, c)
                if with_index or not clamped_in_window:
                    hv, wv = ops.index_expr(hi, torch.int64), ops.index_expr(wi, torch.int64)
                    zero = ops.constant(0, torch.int64)
                    inside = ops.logical_and(
                        ops.logical_and(ops.ge(hv, zero), ops.lt(hv, ops.constant(h, torch.int64))),
                        ops.logical_and(ops.ge(wv, zero), ops.lt(wv, ops.constant(w, torch.int64))),
                    )
                    v = ops.where(inside, v, ops.constant(float("-inf"), c))
                flat = ops.index_expr(hi * w + wi, torch.int64) if with_index else None
                if best is None:
                    best, best_idx = v, flat
                elif not with_index:
                    # the values alone: two selects (greater, then NaN) instead of one on an
                    # `or` of both tests, which GCC does not if-convert: the loop then runs
                    # scalar (ResNet-18's 3x3 pooling 9.5 -> 1.5 ms a call on 2 cores)
                    best = ops.where(ops.gt(v, best), v, best)
                    best = ops.where(ops.isnan(v), v, best)
                else:
                    # strictly greater keeps the first maximum; NaN wins like in eager
                    take = ops.logical_or(
                        ops.gt(v, best),
                        ops.logical_and(ops.isnan(v), ops.logical_not(ops.isnan(best))),
                    )
                    best = ops.where(take, v, best)
                    best_idx = ops.where(take, flat, best_idx)
        return best, best_idx

    def values(index):
        v = window(index, with_index=False)[0]
        return v if c == dtype else ops.to_dtype(v, dtype)

    def indices(index):
        return window(index)[1]

    return (
        StorageBox(Pointwise(dtype, out_size, values)),
        StorageBox(Pointwise(torch.int64, out_size, indices)),
    )


@register(aten.max_pool2d.default)
def max_pool2d(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)[0]
