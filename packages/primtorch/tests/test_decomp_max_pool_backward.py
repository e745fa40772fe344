"""max_pool{2,3}d_with_indices_backward as a gather over the windows each input position can
lie in: matches ATen in float64 on random sizes, kernels, strides, paddings, dilations and
ceil mode (ties included), on channels-last gradients, unbatched inputs, and where a position
lies in more windows than the gather takes (the scatter path); bfloat16 sums in float32,
so it is at least as close to the float64 result as ATen's own bfloat16 kernel."""

import random

import torch
import torch.nn.functional as F

import danlu_primtorch

aten = torch.ops.aten
OPS = {
    2: aten.max_pool2d_with_indices_backward.default,
    3: aten.max_pool3d_with_indices_backward.default,
}
POOL = {2: F.max_pool2d, 3: F.max_pool3d}


def _case(rng, gen, n, dtype, channels_last=False, unbatched=False, kernel=None, stride=None):
    k = kernel or [rng.randint(1, 4) for _ in range(n)]
    s = stride or [rng.randint(1, 3) for _ in range(n)]
    p = [rng.randint(0, ki // 2) for ki in k]
    d = [rng.choice([1, 1, 2]) for _ in range(n)]
    sizes = [rng.randint(1, 8) + (ki - 1) * di for ki, di in zip(k, d)]
    lead = [rng.randint(1, 3)] if unbatched else [rng.randint(1, 3), rng.randint(1, 4)]
    x = torch.randn(lead + sizes, dtype=torch.float64, generator=gen)
    if rng.random() < 0.5:
        x = x.relu()  # zeros: ties, the first maximum's index
    if channels_last and n == 2 and x.dim() == 4:
        x = x.to(memory_format=torch.channels_last)
    x = x.to(dtype).requires_grad_()
    ceil = rng.random() < 0.5
    out, idx = POOL[n](x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    g = torch.randn(out.shape, dtype=torch.float64, generator=gen).to(dtype)
    if channels_last and n == 2 and g.dim() == 4:
        g = g.to(memory_format=torch.channels_last)
    return x, g, idx, (k, s, p, d, ceil)


def _run(n, x, g, idx, args):
    k, s, p, d, ceil = args
    table = danlu_primtorch.decomposition_table("canonical")
    return table[OPS[n]](g, x.detach(), k, s, p, d, ceil, idx)


def _seeded():
    """A fresh seed each run (printed with any failure), its Python and torch generators."""
    seed = random.randrange(1 << 30)
    return seed, random.Random(seed), torch.Generator().manual_seed(seed)


def test_matches_aten_in_float64():
    seed, rng, gen = _seeded()
    for trial in range(120):
        n = rng.choice([2, 3])
        x, g, idx, args = _case(
            rng, gen, n, torch.float64, channels_last=trial % 3 == 0, unbatched=trial % 7 == 0
        )
        want = OPS[n](g, x.detach(), *args[:4], args[4], idx)
        got = _run(n, x, g, idx, args)
        assert got.shape == want.shape and got.dtype == want.dtype, (seed, trial)
        moving = [k for k, size in enumerate(want.shape) if size > 1]  # eager's layout
        strides = [[t.stride(k) for k in moving] for t in (got, want)]
        assert strides[0] == strides[1], (seed, trial, got.stride(), want.stride())
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=f"seed {seed}, {args}")


def test_many_windows_per_position_scatter():
    # kernel 7, stride 1: 49 windows per position, past the gather's limit
    rng, gen = random.Random(0), torch.Generator().manual_seed(0)
    x, g, idx, args = _case(rng, gen, 2, torch.float64, kernel=[7, 7], stride=[1, 1])
    want = OPS[2](g, x.detach(), *args[:4], args[4], idx)
    torch.testing.assert_close(_run(2, x, g, idx, args), want, rtol=1e-12, atol=1e-12)


def test_bfloat16_at_least_as_close_as_aten():
    seed, rng, gen = _seeded()
    for _ in range(20):
        n = rng.choice([2, 3])
        x, g, idx, args = _case(rng, gen, n, torch.bfloat16, kernel=[3] * n, stride=[1] * n)
        exact = OPS[n](g.double(), x.detach().double(), *args[:4], args[4], idx)
        ours = (_run(n, x, g, idx, args).double() - exact).abs().max()
        aten_err = (OPS[n](g, x.detach(), *args[:4], args[4], idx).double() - exact).abs().max()
        assert ours <= aten_err + 1e-6, (seed, args, ours.item(), aten_err.item())
