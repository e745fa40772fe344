"""A sum over a one-hot selection (the cross-entropy gradient's, summed by the log-softmax
backward) is rewritten to the selected value: no reduction over the row, same results."""

from __future__ import annotations

import pytest
import torch
from helpers import aten_graph, check_same

from danlu_inductor.passes import fold_one_hot_sums

aten = torch.ops.aten


def _sums(gm):
    return [n for n in gm.graph.nodes if n.target is aten.sum.dim_IntList]


def _one_hot_sums(logits, t, w):
    r = logits.shape[1]
    hit = (torch.arange(r).view(1, r) == t.unsqueeze(1)) & (t != -100).unsqueeze(1)
    g = torch.where(hit, w.unsqueeze(1), 0.0)
    return g.sum(1, keepdim=True), g.sum(1), g * logits


def _targets(n, r, gen):
    t = torch.randint(0, r, (n,), generator=gen)
    t[::5] = -100  # ignored
    t[1] = r + 3  # outside the row: selects nothing
    t[2] = -7
    t[3] = r - 1
    return t


@pytest.mark.parametrize("rows,cols", [(16, 50), (7, 1)])
def test_one_hot_sums_are_rewritten_and_keep_their_values(rows, cols):
    gen = torch.Generator().manual_seed(3)
    args = (torch.randn(rows, cols, generator=gen), _targets(rows, cols, gen))
    args = (*args, torch.randn(rows, generator=gen))
    gm = aten_graph(_one_hot_sums, *args)
    assert len(_sums(gm)) == 2
    assert fold_one_hot_sums(gm) == 2
    assert _sums(gm) == []
    got = gm(*args)
    expected = _one_hot_sums(*args)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    check_same(_one_hot_sums, *args, rtol=0, atol=0)  # compiled, through the pipeline


def test_cross_entropy_gradient_loses_its_row_sum():
    """The log-softmax backward of a cross-entropy gradient: the sum over the vocabulary of
    the one-hot row goes; the softmax's own sum (a real reduction) stays."""

    def grad(logits, t):
        logp = torch.log_softmax(logits, 1)
        w = (t != -100).float() / (t != -100).sum()
        hit = (torch.arange(logits.shape[1]).view(1, -1) == t.clamp(min=0).unsqueeze(1)) & (
            t != -100
        ).unsqueeze(1)
        g = torch.where(hit, -w.unsqueeze(1), 0.0)
        return g - torch.exp(logp) * g.sum(1, keepdim=True)

    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(12, 40, generator=gen)
    t = _targets(12, 40, gen)
    gm = aten_graph(grad, logits, t)
    before = len(_sums(gm))
    assert fold_one_hot_sums(gm) == 1 and len(_sums(gm)) == before - 1
    check_same(grad, logits, t)


def test_other_sums_stay():
    """Not a one-hot: the iota compared along another dim, a non-zero fallback, a mask that
    varies along the summed dim, an integer sum."""

    def other_dim(x, t):  # several rows may hit a column: a count, not a selection
        hit = torch.arange(x.shape[1]).view(1, -1) == t.unsqueeze(1)
        return torch.where(hit, x[:1, :1], 0.0).sum(0)

    def nonzero_else(x, t):
        hit = torch.arange(x.shape[1]).view(1, -1) == t.unsqueeze(1)
        return torch.where(hit, x[:, :1], 1.0).sum(1)

    def varying_mask(x, t):
        hit = (torch.arange(x.shape[1]).view(1, -1) == t.unsqueeze(1)) & (x > 0)
        return torch.where(hit, x[:, :1], 0.0).sum(1)

    def integer(x, t):
        hit = torch.arange(x.shape[1]).view(1, -1) == t.unsqueeze(1)
        return torch.where(hit, 2, 0).sum(1)

    gen = torch.Generator().manual_seed(5)
    x = torch.randn(6, 9, generator=gen)
    t = torch.randint(0, 9, (6,), generator=gen)
    for fn in (other_dim, nonzero_else, varying_mask, integer):
        gm = aten_graph(fn, x, t)
        assert fold_one_hot_sums(gm) == 0, fn.__name__
        check_same(fn, x, t)
