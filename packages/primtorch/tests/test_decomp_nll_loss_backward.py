"""nll_loss(2d)_backward as a compare-and-select: matches ATen on random class counts, targets,
weights, ignored rows (every row ignored included) and reductions, in float64."""

import random

import torch

import danlu_primtorch

aten = torch.ops.aten


def test_nll_loss_backward_matches_aten():
    table = danlu_primtorch.decomposition_table("canonical")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    checked = 0
    for _ in range(300):
        n, c, extra = rng.randint(1, 6), rng.randint(1, 7), rng.choice([[], [2, 3]])
        x = torch.randn([n, c] + extra, dtype=torch.float64, generator=gen)
        unbatched = not extra and rng.random() < 0.3
        if unbatched:
            x = x[0]
        target = torch.randint(0, c, [] if unbatched else [n] + extra, generator=gen)
        ignore = rng.choice([-100, 0, 1])
        weight = rng.choice([None, torch.rand(c, dtype=torch.float64, generator=gen)])
        reduction = rng.choice([0, 1, 2])
        if unbatched and reduction == 0:
            continue
        fwd = aten.nll_loss2d_forward if extra else aten.nll_loss_forward
        bwd = aten.nll_loss2d_backward if extra else aten.nll_loss_backward
        out, total = fwd.default(x, target, weight, reduction, ignore)
        g = torch.randn(out.shape, dtype=torch.float64, generator=gen)
        want = bwd.default(g, x, target, weight, reduction, ignore, total)
        got = table[bwd.default](g, x, target, weight, reduction, ignore, total)
        assert want.shape == got.shape, seed
        torch.testing.assert_close(got, want, msg=lambda m: f"seed {seed}: {m}")
        checked += 1
    assert checked > 200


def test_all_rows_ignored_gives_zero_gradient():
    # mean over no rows: the forward is 0/0, and ATen's backward is 0 everywhere
    table = danlu_primtorch.decomposition_table("canonical")
    x = torch.randn(6, 3, dtype=torch.float64)
    target = torch.zeros(6, dtype=torch.long)
    out, total = aten.nll_loss_forward.default(x, target, None, 1, 0)
    g = torch.ones((), dtype=torch.float64)
    got = table[aten.nll_loss_backward.default](g, x, target, None, 1, 0, total)
    assert torch.equal(got, torch.zeros_like(x))
