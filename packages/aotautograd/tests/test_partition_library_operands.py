"""Opt-in (``DANLU_KEEP_LIBRARY_OPERANDS=1``): the min-cut partitioner keeps a value a library
op reads on both sides (LLaMA's ``silu(gate) * up``, read by the down projection and again
by its weight gradient) instead of recomputing it in the backward; off, the bytes-only cut
recomputes it. Gradients match eager either way."""

import pytest
import torch
import torch.nn.functional as F
from helpers import bf16_step_beside_eager
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
    x = torch.randn(6, 5, 32).transpose(0, 1)  # non-contiguous
    (partition,) = bf16_step_beside_eager(SwiGLU, x)
    product = _product(partition.forward)
    assert product is not None, partition.forward.graph
    assert (_saved_or_a_view_of_it(partition, product)) is keep, partition.saved
    # the backward recomputes the product from the saved gate and up only when not kept
    assert (not _recomputed_products(partition.backward)) is keep, partition.backward.graph
    assert (partition.details["library_operands_kept"] > 0) is keep
