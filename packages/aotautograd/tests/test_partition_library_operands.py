"""Opt-in (``DANLU_KEEP_LIBRARY_OPERANDS=1``): the min-cut partitioner keeps a value a library
op reads on both sides (LLaMA's ``silu(gate) * up``, read by the down projection and again
by its weight gradient) instead of recomputing it in the backward; off, the bytes-only cut
recomputes it. Gradients match eager either way."""

import pytest
import torch
import torch.nn.functional as F
from helpers import aot_module_recording_partitions
from torch import nn

aten = torch.ops.aten


class SwiGLU(nn.Module):
    def __init__(self, width=32, inner=88):
        super().__init__()
        self.gate = nn.Linear(width, inner, bias=False)
        self.up = nn.Linear(width, inner, bias=False)
        self.down = nn.Linear(inner, width, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x)).float().square().mean()


def _product(gm):
    """The forward's ``silu(gate) * up``: a bf16 mul of two 3-d values, one a silu's."""
    for n in gm.graph.nodes:
        if n.target is aten.mul.Tensor and n.meta["val"].dim() == 3:
            if any(isinstance(a, torch.fx.Node) and a.target is aten.silu.default for a in n.args):
                return n
            if any(
                isinstance(a, torch.fx.Node)
                and a.target is aten.mul.Tensor
                and any(
                    isinstance(b, torch.fx.Node) and b.target is aten.sigmoid.default
                    for b in a.args
                )
                for a in n.args
            ):
                return n
    return None


def _recomputed_products(gm):
    """The backward's 3-d multiplications that no tangent reaches: forward recomputes."""
    from_tangent = set()
    out = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if n.name.startswith("tangents"):
                from_tangent.add(n)
            continue
        if any(a in from_tangent for a in n.all_input_nodes):
            from_tangent.add(n)
        elif n.target is aten.mul.Tensor and n.meta["val"].dim() == 3:
            out.append(n)
    return out


def _saved_or_a_view_of_it(partition, product) -> bool:
    """Is the product, or a view of it (the cut may save either: the same bytes), saved?"""
    nodes = {n.name: n for n in partition.forward.graph.nodes}
    for name in partition.saved:
        n = nodes[name]
        while n is not product and n.op == "call_function" and n.target.is_view:
            n = n.args[0]
        if n is product:
            return True
    return False


@pytest.mark.parametrize("keep", [False, True])
def test_the_product_is_kept_only_when_asked(monkeypatch, keep):
    monkeypatch.setenv("DANLU_KEEP_LIBRARY_OPERANDS", "1" if keep else "0")
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model, ref = SwiGLU(), SwiGLU()
    ref.load_state_dict(model.state_dict())
    compiled, partitions = aot_module_recording_partitions(model)
    x = torch.randn(6, 5, 32).transpose(0, 1).requires_grad_()  # non-contiguous
    x_ref = x.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, loss_ref = compiled(x), ref(x_ref)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=0)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-7)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)

    (partition,) = partitions
    product = _product(partition.forward)
    assert product is not None, partition.forward.graph
    assert (_saved_or_a_view_of_it(partition, product)) is keep, partition.saved
    # the backward recomputes the product from the saved gate and up only when not kept
    assert (not _recomputed_products(partition.backward)) is keep, partition.backward.graph
    assert (partition.details["library_operands_kept"] > 0) is keep
