"""Running real workloads through the canonical table leaves canonical ops only, with eager's answers.

Each function runs under ``DecomposeMode`` (applies the table recursively, records every op
that reached a kernel): forward and backward of small models and functional calls, in float64
so the comparison with eager can be tight.
"""

import pytest
import torch
import torch.nn.functional as F

import danlu_primtorch
from danlu_primtorch.canonical import CANONICAL_OPS
from danlu_primtorch.coverage.run_decomposed import DecomposeMode
from danlu_primtorch.coverage.sweep import compare


def _mlp_step(x, w1, b1, w2, target):
    h = F.gelu(F.layer_norm(F.linear(x, w1, b1), (w1.shape[0],)))
    logits = F.linear(F.dropout(h, 0.0), w2)
    loss = F.cross_entropy(logits, target)
    return torch.autograd.grad(loss, [x, w1, b1, w2])


def _conv_block(x, w):
    y = F.conv2d(x, w, padding=1)
    y = F.batch_norm(y, None, None, training=True)
    y = F.max_pool2d(F.silu(y), 2)
    y = F.adaptive_avg_pool2d(F.avg_pool2d(y, 2, ceil_mode=True), (1, 1))
    return torch.autograd.grad(y.square().sum(), [x, w])


def _attention_ish(q, k, v):
    s = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)
    s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), 0.0)
    out = (s @ v).flatten(1).log_softmax(-1)
    return torch.autograd.grad(out.logsumexp(-1).mean(), [q, k, v])


def _grad_inputs(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in shapes]


CASES = {
    "mlp": lambda: (
        _mlp_step,
        [*_grad_inputs((4, 8), (16, 8), (16,), (5, 16)), torch.tensor([0, 4, 2, 1])],
    ),
    "conv": lambda: (_conv_block, _grad_inputs((2, 3, 9, 9), (4, 3, 3, 3))),
    "attention": lambda: (_attention_ish, _grad_inputs((2, 6, 8), (2, 6, 8), (2, 6, 8))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_workload_reduces_to_canonical_ops_and_matches_eager(name):
    fn, args = CASES[name]()
    expected = fn(*args)
    mode = DecomposeMode(danlu_primtorch.decomposition_table("canonical"))
    with mode:
        actual = fn(*args)
    non_canonical = {str(op) for op in mode.leaves if op not in CANONICAL_OPS}
    assert not non_canonical, f"left non-canonical ops: {sorted(non_canonical)}"
    assert compare(expected, actual) == ""


def test_canonical_table_does_not_touch_canonical_graphs():
    # a program already in the canonical set runs unchanged through the table
    x = torch.randn(3, 4, dtype=torch.float64)
    mode = DecomposeMode(danlu_primtorch.decomposition_table("canonical"))
    with mode:
        y = torch.ops.aten.mm.default(
            torch.ops.aten.exp.default(x), torch.ops.aten.permute.default(x, [1, 0])
        )
    assert mode.leaves == {
        torch.ops.aten.mm.default,
        torch.ops.aten.exp.default,
        torch.ops.aten.permute.default,
    }
    torch.testing.assert_close(y, x.exp() @ x.T)
