"""Pad 16-bit matrix multiplies whose sizes break the library's 16-byte alignment.

cuBLAS picks much slower kernels when a row of an operand or of the result is not a multiple
of 16 bytes (8 bf16/fp16 elements): GPT-2's vocabulary of 50257 makes its language-model head
run an "align1" kernel about 7x slower than an aligned one of the same size. This pass
rewrites ``mm``/``addmm``/``bmm`` on such sizes into zero-padded operands (the padding fuses
into the kernels that produce them, or costs one copy of an input), the library call on
aligned sizes, and a slice of the result. The products are unchanged: padded rows of K
multiply zeros, padded columns of N are sliced away. Graph outputs keep the strides they had
(the lowering copies a sliced result into them).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

ALIGN = 8  # elements of a 16-bit dtype in 16 bytes
MIN_FLOPS = 1 << 27  # below this the copies cost more than the slower kernel
_MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default)


def _meta(v):
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    return v


def _new(graph, target, args, kwargs=None):
    node = graph.call_function(target, args, kwargs or {})
    metas = torch.fx.node.map_arg((args, kwargs or {}), lambda a: _meta(a.meta["val"]))
    node.meta["val"] = target(*metas[0], **metas[1])
    return node


def _static(t) -> bool:
    return all(isinstance(s, int) for s in t.shape)


def pad_matmuls(gm: torch.fx.GraphModule) -> int:
    """Pad the misaligned 16-bit matmuls of ``gm`` in place; returns how many were padded."""
    graph, count = gm.graph, 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _MATMULS:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.bfloat16, torch.float16):
            continue
        bias, a, b = node.args if node.target is aten.addmm.default else (None, *node.args[:2])
        av, bv = a.meta.get("val"), b.meta.get("val")
        if not all(isinstance(t, torch.Tensor) and _static(t) for t in (av, bv, val)):
            continue
        m, k = av.shape[-2], av.shape[-1]
        n = bv.shape[-1]
        pad_k, pad_n = -k % ALIGN, -n % ALIGN
        # a column-major left operand (a transposed view: weight gradients) has rows of m
        col_major = av.stride(-2) == 1 and k > 1 and m > 1
        pad_m = -m % ALIGN if col_major else 0
        batch = av.shape[0] if av.dim() == 3 else 1
        if not (pad_k or pad_n or pad_m) or 2 * batch * m * n * k < MIN_FLOPS:
            continue
        if node.kwargs or (bias is not None and not isinstance(bias, torch.fx.Node)):
            continue  # addmm with beta/alpha: leave it
        with graph.inserting_before(node):
            if pad_m:
                # padded as it is stored: pad the transposed matrix's rows, transpose back
                swap = list(range(av.dim() - 2)) + [av.dim() - 1, av.dim() - 2]
                a = _new(graph, aten.permute.default, (a, swap))
                a = _new(graph, aten.constant_pad_nd.default, (a, [0, pad_m, 0, pad_k]))
                a = _new(graph, aten.permute.default, (a, swap))
            elif pad_k:
                a = _new(graph, aten.constant_pad_nd.default, (a, [0, pad_k]))
            if pad_k or pad_n:
                b = _new(graph, aten.constant_pad_nd.default, (b, [0, pad_n, 0, pad_k]))
            if bias is not None and (pad_n or pad_m):
                bv_shape = bias.meta["val"].shape
                pads = [0, pad_n if bv_shape[-1] == n else 0]
                if len(bv_shape) >= 2:
                    pads += [0, pad_m if bv_shape[-2] == m else 0]
                if any(pads):
                    bias = _new(graph, aten.constant_pad_nd.default, (bias, pads))
            args = (a, b) if bias is None else (bias, a, b)
            out = _new(graph, node.target, args)
            if pad_m:
                out = _new(graph, aten.slice.Tensor, (out, val.dim() - 2, 0, m))
            if pad_n:
                out = _new(graph, aten.slice.Tensor, (out, val.dim() - 1, 0, n))
            if pad_m or pad_n:
                # the slice stands for the product: a graph output keeps the product's
                # strides (the lowering realizes outputs with their value's strides)
                out.meta["val"] = val
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        count += 1
    if count:
        graph.lint()
        gm.recompile()
    return count
