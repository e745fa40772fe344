"""Attention masks with a broadcast last dim are copied to unit stride before the attention
call (so ATen can pick a fused kernel); values and gradients stay eager's."""

import torch
import torch.nn.functional as F
from torch import fx

import danlu_aotautograd as da
from danlu_aotautograd.tracing.attention_masks import (
    mask_for_fused_attention,
    unit_stride_attention_masks,
)


def _attention(q, k, v, keep):
    # a padding-style mask: one compare per query row, broadcast over keys (last stride 0)
    mask = (keep[None, None, :, None] > 0.2).expand(q.shape[0], 1, q.shape[2], k.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)


def test_broadcast_mask_is_copied_and_results_match_eager():
    torch.manual_seed(torch.seed() % (1 << 31))
    q = torch.randn(2, 3, 7, 8, requires_grad=True)
    k = torch.randn(2, 3, 9, 8, requires_grad=True)
    v = torch.randn(2, 3, 9, 8, requires_grad=True)
    keep = torch.rand(7)
    keep[0] = 1.0  # every row keeps its keys or none; a row with none gives NaN in eager too

    gm = fx.symbolic_trace(_attention)
    assert unit_stride_attention_masks(gm) == 1
    assert any(n.target is mask_for_fused_attention for n in gm.graph.nodes)

    compiled = da.aot_function(_attention, da.run_graph)
    out = compiled(q, k, v, keep)
    ref_inputs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref = _attention(*ref_inputs, keep)
    torch.testing.assert_close(out, ref, equal_nan=True)
    g = torch.randn_like(ref)
    (out * g).nan_to_num().sum().backward()
    (ref * g).nan_to_num().sum().backward()
    for a, b in zip((q, k, v), ref_inputs):
        torch.testing.assert_close(a.grad, b.grad)


def test_mask_copy_only_when_needed():
    unit = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    assert mask_for_fused_attention(unit) is unit
    broadcast = torch.ones(4, 1, dtype=torch.bool).expand(4, 4)
    fixed = mask_for_fused_attention(broadcast)
    assert fixed.stride(-1) == 1 and torch.equal(fixed, broadcast)
    assert mask_for_fused_attention(None) is None


def test_aot_graph_applies_the_pass_to_captured_graphs():
    gm = fx.symbolic_trace(_attention)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    keep = torch.rand(5)
    keep[0] = 1.0
    seen = []

    def compiler(aten_gm, inputs):
        seen.append(aten_gm)
        return da.run_graph(aten_gm, inputs)

    run = da.aot_graph(gm, [q, k, v, keep], compiler)
    out = run(q, k, v, keep)
    out = out[0] if isinstance(out, (tuple, list)) else out
    torch.testing.assert_close(out, _attention(q, k, v, keep), equal_nan=True)
    assert any(n.target is mask_for_fused_attention for n in gm.graph.nodes)
