"""The min-cut partitioner does not recompute chains of values the backward reads: a pre-norm
residual stream (LLaMA's) keeps each residual in the forward, and the backward recomputes
one step from it (the norm's output), never the stream itself."""

import torch
from helpers import bf16_step_beside_eager
from torch import nn

aten = torch.ops.aten


class RMSNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width) * 0.1 + 1)

    def forward(self, h):
        h32 = h.float()
        return self.weight * (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-6))


class Stream(nn.Module):
    """Pre-norm blocks on a float32 residual stream, bf16 projections under autocast."""

    def __init__(self, width=48, layers=4):
        super().__init__()
        self.norms = nn.ModuleList(RMSNorm(width) for _ in range(layers))
        self.projs = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))

    def forward(self, h):
        for norm, proj in zip(self.norms, self.projs):
            h = h + proj(norm(h))
        return h.float().square().mean()


def _residual_adds(gm):
    """The residual stream's additions: float32 results of adding a bf16 projection."""
    return [
        n
        for n in gm.graph.nodes
        if n.target is aten.add.Tensor
        and n.meta["val"].dtype == torch.float32
        and n.meta["val"].dim() == 3
        and any(
            isinstance(a, torch.fx.Node) and a.meta["val"].dtype == torch.bfloat16 for a in n.args
        )
    ]


def test_the_residual_stream_is_saved_not_recomputed_and_gradients_match():
    x = torch.randn(6, 5, 48).transpose(0, 1)  # non-contiguous
    (partition,) = bf16_step_beside_eager(Stream, x)
    # a residual the backward recomputes (the last: only the loss reads it) starts from a
    # saved one, never from another recomputed residual
    for add in _residual_adds(partition.backward):
        assert all(a.op == "placeholder" for a in add.all_input_nodes), add.format_node()
    forward_adds = {n.name for n in _residual_adds(partition.forward)}
    assert len(forward_adds) == 4
    # the adds the backward reads are saved; the last one's result only feeds the loss
    assert len(forward_adds & set(partition.saved)) >= 3, (forward_adds, partition.saved)
    assert partition.details["chained_recomputes"] >= 3
