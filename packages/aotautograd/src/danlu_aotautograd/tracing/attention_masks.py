"""Attention masks made readable for the fused attention kernels.

ATen picks the attention kernel (cuDNN, memory-efficient, flash, or the unfused math path)
from tensor metadata when ``scaled_dot_product_attention`` runs. The fused kernels need the
mask's last dim in unit stride; a mask built by broadcasting (transformers' padding masks under
capture: a ``[1, 1, S, 1]`` compare expanded to ``[B, 1, S, S]``) has stride 0 there, so the
math path is chosen: fp32 scores of ``B*H*S*S`` elements, forward and backward. A copy of the
mask in unit stride (a small fused kernel) keeps the fused kernel. Values are unchanged.
"""

from __future__ import annotations

import torch
from torch import fx

from danlu_primtorch.fake.attention import SDPA as _SDPA_TARGETS


def mask_for_fused_attention(mask):
    """``mask`` with its last dim in unit stride (a copy only when it is not)."""
    if (
        isinstance(mask, torch.Tensor)
        and mask.dim() > 0
        and mask.shape[-1] > 1
        and mask.stride(-1) != 1
    ):
        return mask.contiguous()
    return mask


def unit_stride_attention_masks(gm: fx.GraphModule) -> int:
    """Route every attention mask of ``gm``'s attention calls through
    ``mask_for_fused_attention``; returns how many calls were changed."""
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA_TARGETS:
            continue
        if "attn_mask" in node.kwargs:
            mask = node.kwargs["attn_mask"]
        elif len(node.args) > 3:
            mask = node.args[3]
        else:
            continue
        if not isinstance(mask, fx.Node):
            continue
        with gm.graph.inserting_before(node):
            fixed = gm.graph.call_function(mask_for_fused_attention, (mask,))
        if "attn_mask" in node.kwargs:
            node.update_kwarg("attn_mask", fixed)
        else:
            node.update_arg(3, fixed)
        changed += 1
    if changed:
        gm.recompile()
    return changed
