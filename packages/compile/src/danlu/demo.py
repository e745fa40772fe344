"""`python -m danlu.demo`: train a small GPT-style model eager and with `danlu.compile` (and
with any reference compilers the caller passes) from the same initial weights on the same
synthetic data; then show that the losses agree, each compiler's step-time speedup (measured in
interleaved rounds, so all see the same machine) and compile time, whether the machine was too
busy for fair numbers, and what danlu compiled.

The package never calls torch's own compiler; `nox -s demo` runs
`benchmarks/demo_beside_torch_compile.py`, which passes `torch.compile` in as a reference. The demo
runs as `__main__` either way (`-m`, or runpy with `REFERENCES` in its globals): danlu does not
capture frames of its own modules, and TinyGPT must be user code to be compiled.

Runs in a couple of minutes on a 2-core CPU and uses the GPU when there is one.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
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
        f"\r{label:13} [{'#' * done}{'.' * (width - done)}] {i + 1}/{total} loss {loss:.4f}"
    )
    if i + 1 == total:
        sys.stdout.write("\n")
    sys.stdout.flush()


def _step(model, opt, x, y, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, loss.item()


def train(model, opt, steps, batches, device, label):
    losses, times = [], []
    for i, (x, y) in enumerate(batches):
        t, loss = _step(model, opt, x, y, device)
        times.append(t)
        losses.append(loss)
        progress(label, i, steps, losses[-1])
    return losses, times


def timed_rounds(runs, batch, device, rounds=8, steps=5):
    """Steady-state step time of each model, measured in interleaved rounds (a few steps of
    each model per round, on the same batch) so that every model sees the same machine; the
    per-round medians' spread says how steady the machine was."""
    x, y = batch
    per_round = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (model, opt) in runs.items():
            times = [_step(model, opt, x, y, device)[0] for _ in range(steps)]
            per_round[name].append(statistics.median(times))
    return per_round


def machine_note(load_before, per_round) -> str | None:
    """A plain sentence when the numbers are not fair ones, else None: another program was
    using the CPU when the demo started, or step times moved a lot from round to round."""
    cores = os.cpu_count() or 1
    eager = per_round["eager"]
    spread = (max(eager) - min(eager)) / statistics.median(eager)
    reasons = []
    if load_before is not None and load_before > 0.5 * cores:
        reasons.append(f"the load average was {load_before:.1f} on {cores} cores before it started")
    if spread > 0.15:
        reasons.append(f"eager's step time varied by {spread:.0%} between rounds")
    if not reasons:
        return None
    return (
        "The machine looks busy (" + "; ".join(reasons) + "): the speedups above are not fair "
        "numbers. Run the demo again on a quiet machine."
    )


def main(argv=None, references=()) -> int:
    """`references`: compilers to train and time beside danlu, each an object with `name` and
    `compile(model) -> model`, optionally `reset()` (called before compiling) and
    `unavailable(device)` (None when it can run there, else why not)."""
    import danlu

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="training steps (at least 2)")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    if references:
        ap.add_argument(
            "--no-references",
            action="store_true",
            help="train and time only eager and danlu (not "
            + ", ".join(r.name for r in references)
            + ")",
        )
    args = ap.parse_args(argv)
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step includes compilation)")
    device = torch.device(args.device)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    # A model where compilation pays: on the CPU, wide enough that the fused kernels matter
    # and small enough for a couple of minutes; on a GPU, larger batches.
    cfg = dict(vocab=256, d=64, heads=4, layers=2, block_size=64)
    batch, seq = (32, 64) if device.type == "cuda" else (16, 64)
    print(
        f"danlu {danlu.__version__}, torch {torch.__version__}, device {device}, backend {args.backend}"
    )
    print(f"TinyGPT {cfg}, batch {batch}, seq {seq}, {args.steps} AdamW steps\n")

    torch.manual_seed(0)
    base = TinyGPT(**cfg).to(device)
    models = {"eager": base, "danlu": copy.deepcopy(base)}
    skipped, by_name = {}, {}
    for ref in references:
        unavailable = getattr(ref, "unavailable", lambda device: None)
        why = "--no-references" if args.no_references else unavailable(device)
        if why is None:
            models[ref.name], by_name[ref.name] = copy.deepcopy(base), ref
        else:
            skipped[ref.name] = why
    runs, results, stats = {}, {}, None
    for name, model in models.items():
        if name == "danlu":
            danlu.reset()
            stats = danlu.CompileStats.current()
            model = danlu.compile(model, backend=args.backend)
        elif name in by_name:
            getattr(by_name[name], "reset", lambda: None)()
            model = by_name[name].compile(model)
        opt = torch.optim.AdamW(models[name].parameters(), lr=3e-3)
        batches = synthetic_batches(args.steps, batch, seq, cfg["vocab"], device)
        results[name] = train(model, opt, args.steps, batches, device, name)
        runs[name] = (model, opt)

    timing_batch = next(synthetic_batches(1, batch, seq, cfg["vocab"], device, seed=1))
    per_round = timed_rounds(runs, timing_batch, device)
    step_ms = {name: statistics.median(v) * 1e3 for name, v in per_round.items()}

    eager_losses = results["eager"][0]
    print()
    print(f"loss   first {eager_losses[0]:.4f} -> last {eager_losses[-1]:.4f} (eager)")
    agree_all = True
    for name in runs:
        if name == "eager":
            continue
        losses, times = results[name]
        worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(eager_losses, losses))
        agree = worst < 1e-2 and math.isfinite(losses[-1])
        agree_all &= agree or name != "danlu"
        print(
            f"       first {losses[0]:.4f} -> last {losses[-1]:.4f} ({name}); largest relative "
            f"difference from eager over {args.steps} steps: {worst:.2e} -> "
            f"{'agree' if agree else 'DISAGREE'}"
        )
    print("step   " + ", ".join(f"{n} {ms:.2f} ms" for n, ms in step_ms.items()))
    for name in runs:
        if name == "eager":
            continue
        # the first step includes compilation; a steady step is the timed rounds' median
        compile_s = results[name][1][0] - step_ms[name] / 1e3
        print(
            f"       {name}: speedup {step_ms['eager'] / step_ms[name]:.2f}x over eager, "
            f"compile time {compile_s:.1f} s (first step minus a steady step)"
        )
    for name, why in skipped.items():
        print(f"       {name} not run: {why}")
    note = machine_note(load_before, per_round)
    if note:
        print()
        print(note)
    print()
    print(stats.summary())
    return 0 if agree_all else 1


if __name__ == "__main__":
    sys.exit(main(references=globals().get("REFERENCES", ())))
