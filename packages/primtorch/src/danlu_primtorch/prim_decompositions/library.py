"""Matmul, convolution and attention -> library prims."""

from __future__ import annotations

import torch

from danlu_primtorch.prim_decompositions.explicit import (
    P,
    broadcast_to,
    convert,
    operand,
)
from danlu_primtorch.prim_decompositions.registry import PrimDecompositionUnsupported, register
from danlu_primtorch.type_promotion import computation_dtype

aten = torch.ops.aten


def _same_dtype(name, *ts):
    for t in ts[1:]:
        if t.dtype != ts[0].dtype:
            raise RuntimeError(f"{name}: expected one dtype, got {ts[0].dtype} and {t.dtype}")


@register(aten.mm.default)
def mm(a, b):
    _same_dtype("mm", a, b)
    return P.mm(a, b)


@register(aten.bmm.default)
def bmm(a, b):
    _same_dtype("bmm", a, b)
    return P.bmm(a, b)


@register(aten.addmm.default)
def addmm(bias, a, b, *, beta=1, alpha=1):
    """beta * bias + alpha * (a @ b); beta == 0 ignores bias entirely (NaNs too), as eager."""
    _same_dtype("addmm", bias, a, b)
    # float16/bfloat16: product, scaling and bias all in float32, rounded once (as eager)
    compute = computation_dtype(a.dtype)
    prod = P.mm(convert(a, compute), convert(b, compute))
    shape = list(prod.shape)
    out = prod
    if alpha != 1:
        out = P.mul(out, operand(alpha, compute, shape, prod.device))
    if beta != 0:
        c = broadcast_to(convert(bias, compute), shape)
        if beta != 1:
            c = P.mul(c, operand(beta, compute, shape, prod.device))
        out = P.add(out, c)
    return convert(out, a.dtype)


@register(aten.convolution.default)
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _same_dtype("convolution", *(t for t in (x, weight, bias) if t is not None))
    nsp = x.dim() - 2

    def expand(v):
        v = list(v)
        return v * nsp if len(v) == 1 and nsp > 1 else v

    return P.convolution(
        x,
        weight,
        bias,
        expand(stride),
        expand(padding),
        expand(dilation),
        bool(transposed),
        expand(output_padding),
        groups,
    )


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def sdpa_flash_cpu(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    if dropout_p != 0.0:
        raise PrimDecompositionUnsupported("attention dropout: decompose it before attention")
    mask = attn_mask
    if mask is not None:
        mask = broadcast_to(mask, [*q.shape[:-1], k.shape[-2]])
    out, lse = P.scaled_dot_product_attention(q, k, v, mask, bool(is_causal), scale)
    return out, lse
