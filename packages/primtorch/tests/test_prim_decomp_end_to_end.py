"""The prims level end to end: the tracer with ``decomposition_table("prims")`` (ATen ->
canonical -> prims) turns whole training steps into graphs of prims only, which compute what
eager computes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from danlu_primtorch import decomposition_table, trace
from danlu_primtorch.prims import is_prim


def _non_prim_targets(gm):
    return sorted(
        {str(n.target) for n in gm.graph.nodes if n.op == "call_function" and not is_prim(n.target)}
    )


def test_conv_net_training_step_is_all_prims():
    g = torch.Generator().manual_seed(0)
    w1 = (torch.randn(8, 3, 3, 3, generator=g) * 0.3).requires_grad_()
    b1 = torch.zeros(8, requires_grad=True)
    w2 = (torch.randn(10, 8 * 4 * 4, generator=g) * 0.1).requires_grad_()
    b2 = torch.zeros(10, requires_grad=True)

    def step(x, t, w1, b1, w2, b2):
        y = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
        loss = F.cross_entropy(F.linear(y.flatten(1), w2, b2), t)
        return loss, torch.autograd.grad(loss, (w1, b1, w2, b2))

    x, t = torch.randn(2, 3, 8, 8, generator=g), torch.tensor([1, 7])
    gm = trace(step, x, t, w1, b1, w2, b2, decompositions=decomposition_table("prims"))
    assert _non_prim_targets(gm) == []
    loss, grads = gm(x, t, w1, b1, w2, b2)
    ref_loss, ref_grads = step(x, t, w1, b1, w2, b2)
    torch.testing.assert_close(loss, ref_loss)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_causal_attention_forward_and_backward_are_all_prims():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=g).requires_grad_() for _ in range(3))

    def attention(q, k, v):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o, torch.autograd.grad((o * o).sum(), (q, k, v))

    gm = trace(attention, q, k, v, decompositions=decomposition_table("prims"))
    assert _non_prim_targets(gm) == []
    out, grads = gm(q, k, v)
    ref_out, ref_grads = attention(q, k, v)
    torch.testing.assert_close(out, ref_out)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
