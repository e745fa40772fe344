"""`nox -s demo` (or `python -m danlu.demo`): train a small GPT-style model twice — eager and
with `danlu.compile` — from the same initial weights on the same synthetic data, then show that
the losses agree, the step-time speedup, the compile time, and what was compiled.

Runs in a couple of minutes on a 2-core CPU and uses the GPU when there is one.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, block_size=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(block_size, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.ones(block_size, block_size, dtype=torch.bool).triu(1))

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.head(self.ln(x))
        return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def synthetic_batches(steps, batch, seq, vocab, device, seed=0):
    """Sequences with learnable structure: each token is the previous plus a fixed stride."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        stride = torch.randint(1, 4, (batch, 1), generator=g)
        seqs = (start + stride * torch.arange(seq + 1)) % vocab
        yield seqs[:, :-1].to(device), seqs[:, 1:].to(device)


def progress(label, i, total, loss, width=30):
    done = int(width * (i + 1) / total)
    if i + 1 != total and done == int(width * i / total):
        return  # redraw only when the bar grows, so logs stay short
    sys.stdout.write(
        f"\r{label:9} [{'#' * done}{'.' * (width - done)}] {i + 1}/{total} loss {loss:.4f}"
    )
    if i + 1 == total:
        sys.stdout.write("\n")
    sys.stdout.flush()


def train(model, steps, batches, device, label):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, times = [], []
    for i, (x, y) in enumerate(batches):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        progress(label, i, steps, losses[-1])
    return losses, times


def main(argv=None) -> int:
    import danlu

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="training steps (at least 2)")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step includes compilation)")
    device = torch.device(args.device)
    cfg = dict(vocab=256, d=64, heads=4, layers=2, block_size=64)
    batch, seq = (32, 64) if device.type == "cuda" else (16, 64)
    print(
        f"danlu {danlu.__version__}, torch {torch.__version__}, device {device}, backend {args.backend}"
    )
    print(f"TinyGPT {cfg}, batch {batch}, seq {seq}, {args.steps} AdamW steps\n")

    torch.manual_seed(0)
    eager_model = TinyGPT(**cfg).to(device)
    compiled_base = copy.deepcopy(eager_model)

    eager_losses, eager_times = train(
        eager_model,
        args.steps,
        synthetic_batches(args.steps, batch, seq, cfg["vocab"], device),
        device,
        "eager",
    )
    danlu.reset()
    stats = danlu.CompileStats.current()
    compiled = danlu.compile(compiled_base, backend=args.backend)
    comp_losses, comp_times = train(
        compiled,
        args.steps,
        synthetic_batches(args.steps, batch, seq, cfg["vocab"], device),
        device,
        "compiled",
    )

    # The first compiled step includes compilation; steady state excludes a warm-up of up to 5
    # steps (fewer when the run is short).
    skip = min(5, len(comp_times) - 1)
    compile_time = comp_times[0] - statistics.median(comp_times[skip:])
    eager_step, comp_step = (
        statistics.median(eager_times[skip:]),
        statistics.median(comp_times[skip:]),
    )
    worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(eager_losses, comp_losses))
    agree = worst < 1e-2 and math.isfinite(comp_losses[-1])
    print()
    print(f"loss   first {eager_losses[0]:.4f} -> last {eager_losses[-1]:.4f} (eager)")
    print(f"       first {comp_losses[0]:.4f} -> last {comp_losses[-1]:.4f} (compiled)")
    print(
        f"       largest relative difference over {args.steps} steps: {worst:.2e} -> {'agree' if agree else 'DISAGREE'}"
    )
    print(
        f"step   eager {eager_step * 1e3:.2f} ms, compiled {comp_step * 1e3:.2f} ms -> speedup {eager_step / comp_step:.2f}x"
    )
    print(f"compile time (first step minus a steady step): {compile_time:.2f} s")
    print()
    print(stats.summary())
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
