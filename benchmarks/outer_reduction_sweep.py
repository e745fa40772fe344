"""Column reductions of channels-last images: which split and launch config reads memory fastest.

ResNet-50 training's batch-norm backward sums (per channel, over N x H x W rows, 3 bf16
tensors read) ran at 0.8-1.8 TB/s in danlu on the H100 (run 64: layer 3's 11 launches 23.7 us
each against torch.compile's 9.6). This times, with the L2 cache flushed before every launch
(a training step's inputs come from HBM) and without (what the autotuner saw):

- a hand-written two-stage Triton reduction of the same pattern, over a grid of splits of the
  rows (chunks) and launch configs (XBLOCK channels x RBLOCK rows a step, warps), every size a
  runtime argument (one build per config);
- danlu.compile and torch.compile of the same function.

    python benchmarks/outer_reduction_sweep.py --out results.json
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import torch
import triton
import triton.language as tl

SHAPES = [(64, 64, 112, 112), (64, 256, 56, 56), (64, 128, 28, 28), (64, 256, 14, 14)]
SHAPES += [(64, 512, 7, 7), (64, 2048, 7, 7)]
CONFIGS = [
    (32, 32, 4),
    (64, 16, 4),
    (32, 64, 8),
    (64, 32, 8),
    (128, 16, 8),
    (64, 64, 8),
    (16, 64, 4),
    (128, 8, 4),
]
STATS_SHAPES = [(64, 256, 56, 56), (64, 128, 28, 28), (64, 256, 14, 14)]
SPLITS = (8, 16, 32, 49, 64, 98, 128, 196, 256, 392, 512, 784, 1024)


@triton.jit
def _partials(C, S, XBLOCK: tl.constexpr):
    # this program's partials (a column of XBLOCK): chunk-major, channel c of chunk s
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    return xindex, xindex < C * S, xindex % C, xindex // C


@triton.jit
def partial_sums(
    a_ptr,
    g_ptr,
    x_ptr,
    mean_ptr,
    rstd_ptr,
    out1,
    out2,
    C,
    S,
    L,
    XBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    xindex, xmask, c, s = _partials(C, S, XBLOCK)
    mean = tl.load(mean_ptr + c, xmask, other=0)
    rstd = tl.load(rstd_ptr + c, xmask, other=0)
    acc1 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    acc2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for r0 in range(0, L, RBLOCK):
        r = r0 + tl.arange(0, RBLOCK)[None, :]
        m = xmask & (r < L)
        off = (s * L + r) * C + c
        a = tl.load(a_ptr + off, m, other=0).to(tl.float32)
        g = tl.load(g_ptr + off, m, other=0).to(tl.float32)
        x = tl.load(x_ptr + off, m, other=0).to(tl.float32)
        v = tl.where(a <= 0, 0.0, g)
        acc1 = tl.where(m, acc1 + v, acc1)
        acc2 = tl.where(m, acc2 + v * (x - mean) * rstd, acc2)
    tl.store(out1 + xindex, tl.sum(acc1, 1)[:, None], xmask)
    tl.store(out2 + xindex, tl.sum(acc2, 1)[:, None], xmask)


@triton.jit
def partial_welford(x_ptr, out_mean, out_m2, C, S, L, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # the batch-norm statistics as danlu generates them: a running mean and sum of squared
    # deviations a lane, one division an element
    xindex, xmask, c, s = _partials(C, S, XBLOCK)
    mean = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    m2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    n = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for r0 in range(0, L, RBLOCK):
        r = r0 + tl.arange(0, RBLOCK)[None, :]
        m = xmask & (r < L)
        x = tl.load(x_ptr + (s * L + r) * C + c, m, other=0).to(tl.float32)
        n_next = tl.where(m, n + 1.0, n)
        delta = x - mean
        mean_next = tl.where(m, mean + delta / tl.where(n_next == 0.0, 1.0, n_next), mean)
        m2 = tl.where(m, m2 + delta * (x - mean_next), m2)
        mean = mean_next
        n = n_next
    mean_all, m2_all, _ = tl.reduce((mean, m2, n), 1, _welford_combine)
    tl.store(out_mean + xindex, mean_all[:, None], xmask)
    tl.store(out_m2 + xindex, m2_all[:, None], xmask)


@triton.jit
def partial_shifted(x_ptr, out_mean, out_m2, C, S, L, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # the same statistics from sums of values shifted by the chunk's first value (stable while
    # the shift is near the mean): no division an element
    xindex, xmask, c, s = _partials(C, S, XBLOCK)
    shift = tl.load(x_ptr + (s * L) * C + c, xmask, other=0).to(tl.float32)
    s1 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    s2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for r0 in range(0, L, RBLOCK):
        r = r0 + tl.arange(0, RBLOCK)[None, :]
        m = xmask & (r < L)
        x = tl.load(x_ptr + (s * L + r) * C + c, m, other=0).to(tl.float32)
        d = tl.where(m, x - shift, 0.0)
        s1 += d
        s2 += d * d
    t1 = tl.sum(s1, 1)[:, None]
    t2 = tl.sum(s2, 1)[:, None]
    tl.store(out_mean + xindex, shift + t1 / L, xmask)
    tl.store(out_m2 + xindex, t2 - t1 * t1 / L, xmask)


@triton.jit
def _welford_combine(mean1, m21, n1, mean2, m22, n2):
    n = n1 + n2
    delta = mean2 - mean1
    w = tl.where(n == 0.0, 0.0, n2 / tl.where(n == 0.0, 1.0, n))
    return mean1 + delta * w, m21 + m22 + delta * delta * n1 * w, n


# static shapes: each shape its own kernels, as in a model (not one kernel for all sizes)
COMPILERS = (
    ("torch", functools.partial(torch.compile, dynamic=False)),
    ("danlu", lambda fn: __import__("danlu").compile(fn, dynamic=False)),
)


def stats(x):
    return torch.var_mean(x, dim=(0, 2, 3), correction=0)


@triton.jit
def finish_sums(p1, p2, o1, o2, C, S, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    c = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    cmask = c < C
    acc1 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    acc2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for s0 in range(0, S, RBLOCK):
        s = s0 + tl.arange(0, RBLOCK)[None, :]
        m = cmask & (s < S)
        acc1 += tl.load(p1 + s * C + c, m, other=0)
        acc2 += tl.load(p2 + s * C + c, m, other=0)
    tl.store(o1 + c, tl.sum(acc1, 1)[:, None], cmask)
    tl.store(o2 + c, tl.sum(acc2, 1)[:, None], cmask)


def bn_backward_sums(a, g, x, mean, rstd, acc=torch.float32):
    v = torch.where(a <= 0, 0.0, g.to(acc))
    s1 = v.sum((0, 2, 3))
    s2 = (v * (x.to(acc) - mean[None, :, None, None]) * rstd[None, :, None, None]).sum((0, 2, 3))
    return s1, s2


class Timer:
    def __init__(self):
        self.flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")

    def __call__(self, fn, cold: bool, reps: int = 15) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            if cold:
                self.flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return round(times[len(times) // 2] * 1000, 2)  # us


def inputs(shape):
    n, c, h, w = shape

    def cl(t):
        return t.to(memory_format=torch.channels_last)

    a = cl(torch.randn(shape, device="cuda", dtype=torch.bfloat16))
    g = cl(torch.randn(shape, device="cuda", dtype=torch.bfloat16))
    x = cl(torch.randn(shape, device="cuda", dtype=torch.bfloat16))
    mean = torch.randn(c, device="cuda")
    rstd = torch.rand(c, device="cuda") + 0.5
    return a, g, x, mean, rstd


def hand_written(args, splits, cfg):
    a, g, x, mean, rstd = args
    n, c, h, w = a.shape
    rows = n * h * w
    length = rows // splits
    p1 = torch.empty(splits * c, device="cuda")
    p2 = torch.empty_like(p1)
    o1 = torch.empty(c, device="cuda")
    o2 = torch.empty_like(o1)
    xb, rb, warps = cfg
    grid1 = (triton.cdiv(c * splits, xb),)
    fb = 32
    grid2 = (triton.cdiv(c, fb),)

    def first():
        partial_sums[grid1](
            a, g, x, mean, rstd, p1, p2, c, splits, length, XBLOCK=xb, RBLOCK=rb, num_warps=warps
        )

    def run():
        first()
        if splits > 1:
            finish_sums[grid2](p1, p2, o1, o2, c, splits, XBLOCK=fb, RBLOCK=32, num_warps=4)

    return first, run, (o1, o2) if splits > 1 else (p1, p2)


def welford_hand_written(x, splits, cfg, kernel=None):
    """The first stage only (the second is a small kernel of the partials)."""
    n, c, h, w = x.shape
    length = n * h * w // splits
    pm = torch.empty(splits * c, device="cuda")
    p2 = torch.empty_like(pm)
    xb, rb, warps = cfg
    grid = (triton.cdiv(c * splits, xb),)

    def run():
        (kernel or partial_welford)[grid](
            x, pm, p2, c, splits, length, XBLOCK=xb, RBLOCK=rb, num_warps=warps
        )

    return run


def stats_row(shape, timer, with_compilers):
    x = inputs(shape)[2]
    n, c, h, w = shape
    rows = n * h * w
    row = {"shape": shape, "pattern": "stats", "MB": round(x.numel() * 2 / 1e6, 1), "hand": []}
    for name, compiler in COMPILERS if with_compilers else ():
        try:
            fn = compiler(stats)
            fn(x)
            call = functools.partial(fn, x)
            row[name] = {"cold_us": timer(call, True), "warm_us": timer(call, False)}
        except Exception as e:
            row[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    for splits in [s for s in SPLITS if rows % s == 0 and rows // s >= 32]:
        for cfg in CONFIGS[:6]:
            for kind, kernel in (("welford", partial_welford), ("shifted", partial_shifted)):
                try:
                    run = welford_hand_written(x, splits, cfg, kernel)
                    row["hand"].append(
                        {"kind": kind, "splits": splits, "cfg": cfg, "cold_us": timer(run, True)}
                    )
                except Exception as e:
                    row["hand"].append(
                        {"kind": kind, "splits": splits, "cfg": cfg, "error": str(e)[:120]}
                    )
    best = sorted((h for h in row["hand"] if "cold_us" in h), key=lambda h: h["cold_us"])[:6]
    print(
        "stats",
        shape,
        row["MB"],
        "MB",
        "torch",
        row.get("torch"),
        "danlu",
        row.get("danlu"),
        flush=True,
    )
    for b in best:
        print("   ", b, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="outer_reduction_sweep.json")
    ap.add_argument("--with-compilers", action="store_true", help="also torch.compile, danlu")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds for the whole sweep")
    args = ap.parse_args()
    t0 = time.time()
    timer = Timer()
    results = []
    for shape in SHAPES:
        if time.time() - t0 > args.budget:
            break
        data = inputs(shape)
        n, c, h, w = shape
        rows = n * h * w
        ref = bn_backward_sums(*[t.double() for t in data], acc=torch.float64)
        moved = 3 * data[0].numel() * 2
        row = {"shape": shape, "MB": round(moved / 1e6, 1), "hand": []}
        for name, compiler in COMPILERS if args.with_compilers else ():
            try:
                fn = compiler(bn_backward_sums)
                out = fn(*data)
                ok = all(
                    torch.allclose(o.double(), r, rtol=1e-2, atol=1e-1 * (rows**0.5))
                    for o, r in zip(out, ref)
                )
                call = functools.partial(fn, *data)
                row[name] = {
                    "cold_us": timer(call, True),
                    "warm_us": timer(call, False),
                    "ok": ok,
                }
            except Exception as e:  # a compiler failure is a result too
                row[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        for splits in [s for s in SPLITS if rows % s == 0 and rows // s >= 32]:
            for cfg in CONFIGS:
                first, run, out = hand_written(data, splits, cfg)
                try:
                    stage1 = timer(first, True)
                    cold = timer(run, True)
                except Exception as e:
                    row["hand"].append({"splits": splits, "cfg": cfg, "error": str(e)[:120]})
                    continue
                ok = all(
                    torch.allclose(o.double(), r, rtol=1e-2, atol=1e-1 * (rows**0.5))
                    for o, r in zip(out, ref)
                )
                row["hand"].append(
                    {"splits": splits, "cfg": cfg, "stage1_us": stage1, "cold_us": cold, "ok": ok}
                )
        best = sorted(
            (h for h in row["hand"] if "cold_us" in h and h["ok"]), key=lambda h: h["cold_us"]
        )[:5]
        print(
            shape, row["MB"], "MB", "torch", row.get("torch"), "danlu", row.get("danlu"), flush=True
        )
        for b in best:
            print("   ", b, f"{moved / b['cold_us'] / 1e6:.2f} TB/s", flush=True)
        results.append(row)
        if shape in STATS_SHAPES and time.time() - t0 < args.budget:
            results.append(stats_row(shape, timer, args.with_compilers))
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
