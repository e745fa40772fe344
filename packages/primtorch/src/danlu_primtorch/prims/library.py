"""Library-kernel prims: operations a backend calls (BLAS, convolution, attention libraries)
rather than generates. Operands share one dtype and device; outputs are contiguous unless
stated.
"""

from __future__ import annotations

import math

import torch

from danlu_primtorch.prims.checks import dtype_in, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import (
    channels_last_strides,
    contiguous_strides,
    dense_order,
    is_channels_last_contiguous,
    is_contiguous,
)

OPS: dict[str, torch._ops.OpOverload] = {}


def _same_dtype_device(name, *ts):
    for t in ts[1:]:
        if t.dtype != ts[0].dtype or t.device != ts[0].device:
            fail(
                name,
                f"operands must share dtype and device, got {ts[0].dtype}/{ts[0].device} "
                f"and {t.dtype}/{t.device}",
            )


def _mm_shape(a, b):
    _same_dtype_device("mm", a, b)
    dtype_in("mm", a, "int|float")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        fail("mm", f"wants (m, k) @ (k, n), got {tuple(a.shape)} @ {tuple(b.shape)}")
    return [a.shape[0], b.shape[1]]


def _bmm_shape(a, b):
    _same_dtype_device("bmm", a, b)
    dtype_in("bmm", a, "int|float")
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        fail("bmm", f"wants (b, m, k) @ (b, k, n), got {tuple(a.shape)} @ {tuple(b.shape)}")
    return [a.shape[0], a.shape[1], b.shape[2]]


def _contig(shape, like):
    return torch.empty_strided(
        shape, contiguous_strides(shape), dtype=like.dtype, device=like.device
    )


OPS["mm"] = define_prim(
    "mm(Tensor a, Tensor b) -> Tensor",
    PrimKind.LIBRARY,
    meta=lambda a, b: _contig(_mm_shape(a, b), a),
    impl=lambda a, b: (_mm_shape(a, b), torch.mm(a, b).contiguous())[1],
    doc="Matrix product (m, k) @ (k, n) -> (m, n) in the operands' dtype.\n\n"
    "Floating accumulation is at least in float32 and in an unspecified order. Contiguous.",
)

OPS["bmm"] = define_prim(
    "bmm(Tensor a, Tensor b) -> Tensor",
    PrimKind.LIBRARY,
    meta=lambda a, b: _contig(_bmm_shape(a, b), a),
    impl=lambda a, b: (_bmm_shape(a, b), torch.bmm(a, b).contiguous())[1],
    doc="Batched matrix product (b, m, k) @ (b, k, n) -> (b, m, n) in the operands' dtype.\n\n"
    "Accumulation as mm. Contiguous output.",
)


def _conv_shape(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    ts = (x, w) if bias is None else (x, w, bias)
    _same_dtype_device("convolution", *ts)
    dtype_in("convolution", x, "int|float")
    nsp = x.dim() - 2
    if nsp < 1 or w.dim() != x.dim():
        fail(
            "convolution",
            f"wants (N, C, *spatial) input and a weight of the same rank, got "
            f"{tuple(x.shape)} and {tuple(w.shape)}",
        )
    for name, v in (
        ("stride", stride),
        ("padding", padding),
        ("dilation", dilation),
        ("output_padding", output_padding),
    ):
        if len(v) != nsp:
            fail("convolution", f"{name} needs {nsp} entries, got {list(v)}")
    if transposed:
        if x.shape[1] != w.shape[0]:
            fail("convolution", "input channels must equal weight.size(0) when transposed")
        out_c = w.shape[1] * groups
        spatial = [
            (x.shape[2 + i] - 1) * stride[i]
            - 2 * padding[i]
            + dilation[i] * (w.shape[2 + i] - 1)
            + output_padding[i]
            + 1
            for i in range(nsp)
        ]
    else:
        if x.shape[1] != w.shape[1] * groups:
            fail(
                "convolution",
                f"input channels {x.shape[1]} != weight.size(1) * groups ({w.shape[1]} * {groups})",
            )
        out_c = w.shape[0]
        spatial = [
            (x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i]
            + 1
            for i in range(nsp)
        ]
    if any(s <= 0 for s in spatial):
        fail("convolution", f"output spatial size {spatial} is not positive")
    return [x.shape[0], out_c, *spatial]


def _conv_channels_last(x, w) -> bool:
    def cl(t):
        return (
            t.dim() == 4
            and not is_contiguous(t.shape, t.stride())
            and is_channels_last_contiguous(t.shape, t.stride())
        )

    return cl(x) or cl(w)


def _conv_meta(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = _conv_shape(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
    strides = (
        channels_last_strides(shape) if _conv_channels_last(x, w) else contiguous_strides(shape)
    )
    return torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device)


def _conv_impl(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = _conv_shape(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
    out = torch.ops.aten.convolution.default(
        x, w, bias, stride, padding, dilation, transposed, output_padding, groups
    )
    if _conv_channels_last(x, w):
        return out.contiguous(memory_format=torch.channels_last)
    assert list(out.shape) == shape
    return out.contiguous()


OPS["convolution"] = define_prim(
    "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    PrimKind.LIBRARY,
    meta=_conv_meta,
    impl=_conv_impl,
    doc="N-d (transposed) convolution with zero padding, as aten.convolution.\n\n"
    "input (N, C, *spatial), weight (O, C/groups, *k) or (C, O/groups, *k) when transposed, "
    "optional bias (O,). Contiguous output, channels-last if a 4-d input or weight is.",
)


def _sdpa_check(q, k, v, mask, is_causal, scale):
    _same_dtype_device("scaled_dot_product_attention", q, k, v)
    dtype_in("scaled_dot_product_attention", q, "float")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        fail("scaled_dot_product_attention", "q, k, v must share rank >= 2")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-1] != v.shape[:-1] or q.shape[-1] != k.shape[-1]:
        fail(
            "scaled_dot_product_attention",
            f"shapes q{tuple(q.shape)} k{tuple(k.shape)} "
            f"v{tuple(v.shape)} do not fit (..., L, E), (..., S, E), (..., S, Ev)",
        )
    if mask is not None:
        if mask.dtype != torch.bool and mask.dtype != q.dtype:
            fail("scaled_dot_product_attention", "mask must be bool or q's dtype")
        _same_dtype_device(
            "scaled_dot_product_attention", *([q, mask] if mask.dtype == q.dtype else [q])
        )
        if list(mask.shape) != [*q.shape[:-1], k.shape[-2]]:
            fail(
                "scaled_dot_product_attention",
                "mask must have shape (..., L, S): broadcast it first",
            )
    if is_causal and mask is not None:
        fail("scaled_dot_product_attention", "is_causal and a mask are exclusive")
    out_shape = [*q.shape[:-1], v.shape[-1]]
    return out_shape, list(q.shape[:-1])


def _sdpa_layouts(q, out_shape, lse_shape):
    """Eager's layouts: out in q's memory order; for 4-d q the logsumexp is (N, L, H)-major."""
    perm = dense_order(q.shape, [q.stride()])
    out_strides = [0] * len(out_shape)
    acc = 1
    for d in perm:
        out_strides[d] = acc
        acc *= out_shape[d]
    if len(lse_shape) == 3:
        _, heads, length = lse_shape
        lse_strides = (length * heads, 1, heads)
    else:
        lse_strides = contiguous_strides(lse_shape)
    return out_strides, lse_strides


def _sdpa_meta(q, k, v, attn_mask, is_causal, scale):
    out_shape, lse_shape = _sdpa_check(q, k, v, attn_mask, is_causal, scale)
    out_strides, lse_strides = _sdpa_layouts(q, out_shape, lse_shape)
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    return (
        torch.empty_strided(out_shape, out_strides, dtype=q.dtype, device=q.device),
        torch.empty_strided(lse_shape, lse_strides, dtype=lse_dtype, device=q.device),
    )


def _sdpa_impl(q, k, v, attn_mask, is_causal, scale):
    _sdpa_check(q, k, v, attn_mask, is_causal, scale)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    qa, ka, va = q.to(acc), k.to(acc), v.to(acc)
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(qa, ka.transpose(-2, -1)) * s
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.to(acc)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    probs = torch.nan_to_num(probs, nan=0.0)  # fully masked rows give zeros, as eager's kernels
    out = torch.matmul(probs, va).to(q.dtype)
    out_strides, lse_strides = _sdpa_layouts(q, list(out.shape), list(lse.shape))
    return (
        torch.empty_strided(out.shape, out_strides, dtype=out.dtype, device=out.device).copy_(out),
        torch.empty_strided(lse.shape, lse_strides, dtype=lse.dtype, device=lse.device).copy_(lse),
    )


OPS["scaled_dot_product_attention"] = define_prim(
    "scaled_dot_product_attention(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, "
    "bool is_causal, float? scale) -> (Tensor out, Tensor logsumexp)",
    PrimKind.LIBRARY,
    meta=_sdpa_meta,
    impl=_sdpa_impl,
    doc="softmax(q @ k^T * scale + mask) @ v, and the row logsumexp of the scaled scores.\n\n"
    "q (..., L, E), k (..., S, E), v (..., S, Ev), one dtype; scale defaults to 1/sqrt(E); "
    "attn_mask (..., L, S) is bool (True = keep) or additive in q's dtype; is_causal keeps "
    "the lower triangle (top-left aligned). No dropout (apply it outside). Computed in float32 "
    "at least; logsumexp is float32 (float64 for float64 q). out is dense in q's memory order; "
    "for 4-d q (N, H, L, E) logsumexp (N, H, L) is laid out (N, L, H)-major, as eager's "
    "kernels; otherwise contiguous.",
)
