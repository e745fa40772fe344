"""Backward library kernels (convolution, CPU flash attention) written with library prims.

A training graph at the prims level then holds no ATen op for these: the gradients are
convolutions, batched matmuls and elementwise prims a backend already handles.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import P, broadcast_to, convert, full_like_shape
from danlu_primtorch.prim_decompositions.registry import PrimDecompositionUnsupported, register
from danlu_primtorch.prims.strides import (
    channels_last_strides,
    contiguous_strides,
    is_channels_last_contiguous,
    is_contiguous,
)
from danlu_primtorch.type_promotion import computation_dtype

aten = torch.ops.aten


def _per_dim(v, n):
    v = list(v)
    return v * n if len(v) == 1 and n > 1 else v


def _channels_last(t) -> bool:
    return (
        t.dim() == 4
        and not is_contiguous(t.shape, t.stride())
        and (is_channels_last_contiguous(t.shape, t.stride()))
    )


def _layout(t, channels_last: bool):
    shape = list(t.shape)
    strides = channels_last_strides(shape) if channels_last else contiguous_strides(shape)
    if tuple(t.stride()) == tuple(strides) or t.numel() <= 1:
        return t
    return P.copy_strided(t, list(strides))


def _weight_grad(inp, grad, kernel, stride, padding, dilation, groups):
    """d(conv)/d(weight): (grad channels, inp channels / groups, *kernel).

    A convolution over the batch: inp as (C/g, g*N, *sp) and grad as a (O, N, *osp) weight,
    with stride and dilation swapped, then cropped to the kernel size.
    """
    n, c = inp.shape[0], inp.shape[1]
    nsp = inp.dim() - 2
    cg = c // groups
    sp = list(inp.shape[2:])
    x = P.reshape(inp, [n, groups, cg, *sp])
    x = P.permute(x, [2, 1, 0, *range(3, 3 + nsp)])
    x = P.reshape(x, [cg, groups * n, *sp])
    w = P.permute(grad, [1, 0, *range(2, 2 + nsp)])
    out = P.convolution(x, w, None, dilation, padding, stride, False, [0] * nsp, groups)
    for i, k in enumerate(kernel):
        if out.shape[2 + i] != k:
            out = P.slice(out, 2 + i, 0, k, 1)
    return P.permute(out, [1, 0, *range(2, 2 + nsp)])


@register(aten.convolution_backward.default)
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    nsp = input.dim() - 2
    stride, padding, dilation = (_per_dim(v, nsp) for v in (stride, padding, dilation))
    kernel = list(weight.shape[2:])
    cl = _channels_last(input) or _channels_last(weight) or _channels_last(grad_output)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            gi = P.convolution(
                grad_output, weight, None, stride, padding, dilation, False, [0] * nsp, groups
            )
        else:
            out_pad = [
                input.shape[2 + i]
                - (
                    (grad_output.shape[2 + i] - 1) * stride[i]
                    - 2 * padding[i]
                    + dilation[i] * (kernel[i] - 1)
                    + 1
                )
                for i in range(nsp)
            ]
            gi = P.convolution(
                grad_output, weight, None, stride, padding, dilation, True, out_pad, groups
            )
        grad_input = _layout(gi, cl)
    if output_mask[1]:
        if transposed:
            gw = _weight_grad(grad_output, input, kernel, stride, padding, dilation, groups)
        else:
            gw = _weight_grad(input, grad_output, kernel, stride, padding, dilation, groups)
        grad_weight = _layout(gw, cl)
    if output_mask[2]:
        acc = computation_dtype(grad_output.dtype)
        gb = P.sum(convert(grad_output, acc), [0, *range(2, 2 + nsp)])
        grad_bias = convert(gb, grad_output.dtype)
    return grad_input, grad_weight, grad_bias


@register(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def sdpa_flash_cpu_backward(
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    dropout_p,
    is_causal,
    *,
    attn_mask=None,
    scale=None,
):
    """Recomputes the probabilities from the saved logsumexp; gradients in eager's
    (N, L, H, E)-major layout."""
    if dropout_p != 0.0:
        raise PrimDecompositionUnsupported("attention dropout: decompose it before attention")
    if query.dim() != 4 or key.shape[1] != query.shape[1]:
        raise PrimDecompositionUnsupported("attention backward wants (N, H, L, E) with equal heads")
    n, h, lq, e = query.shape
    lk, ev = key.shape[2], value.shape[3]
    acc = computation_dtype(query.dtype)
    s = scale if scale is not None else e**-0.5

    def as3(t, rows, cols):
        return P.reshape(convert(t, acc), [n * h, rows, cols])

    q, k, v = as3(query, lq, e), as3(key, lk, e), as3(value, lk, ev)
    do, o = as3(grad_out, lq, ev), as3(out, lq, ev)
    scores = P.bmm(q, P.permute(k, [0, 2, 1]))
    scores = P.mul(scores, full_like_shape(scores, s))
    neg_inf = full_like_shape(scores, float("-inf"))
    if is_causal:
        dev = query.device
        rows = P.broadcast_in_dim(
            P.iota(lq, start=0, step=1, dtype=torch.int64, device=dev), [n * h, lq, lk], [1]
        )
        cols = P.broadcast_in_dim(
            P.iota(lk, start=0, step=1, dtype=torch.int64, device=dev), [n * h, lq, lk], [2]
        )
        scores = P.where(P.ge(rows, cols), scores, neg_inf)
    if attn_mask is not None:
        mask = P.reshape(broadcast_to(attn_mask, [n, h, lq, lk]), [n * h, lq, lk])
        if mask.dtype == torch.bool:
            scores = P.where(mask, scores, neg_inf)
        else:
            scores = P.add(scores, convert(mask, acc))
    lse = P.broadcast_in_dim(
        P.reshape(convert(logsumexp, acc), [n * h, lq]), [n * h, lq, lk], [0, 1]
    )
    probs = P.exp(P.sub(scores, lse))
    # rows with every key masked: the forward wrote zeros, so nothing flows back
    probs = P.where(P.eq(lse, neg_inf), full_like_shape(probs, 0.0), probs)
    grad_v = P.bmm(P.permute(probs, [0, 2, 1]), do)
    grad_p = P.bmm(do, P.permute(v, [0, 2, 1]))
    delta = P.broadcast_in_dim(P.sum(P.mul(do, o), [2]), [n * h, lq, lk], [0, 1])
    grad_s = P.mul(probs, P.sub(grad_p, delta))
    grad_s = P.mul(grad_s, full_like_shape(grad_s, s))
    grad_q = P.bmm(grad_s, k)
    grad_k = P.bmm(P.permute(grad_s, [0, 2, 1]), q)

    def back(t, length, width):
        t = convert(P.reshape(t, [n, h, length, width]), query.dtype)
        return P.copy_strided(t, [length * h * width, width, h * width, 1])

    return back(grad_q, lq, e), back(grad_k, lk, e), back(grad_v, lk, ev)
