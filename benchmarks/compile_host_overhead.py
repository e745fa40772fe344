"""Per-call host time of a compiled module whose tensor work is tiny.

A stack of small blocks (Linear, ReLU, LayerNorm, residual; 4 parameters each) on a 4x8 input:
the kernels take microseconds, so a call's time is the compiler's per-call machinery (guards,
the runner that gathers parameters, aotautograd's cache lookup, the generated wrapper). That
machinery is what makes a GPU step launch-bound. eager, torch.compile and danlu.compile are
timed interleaved in one run (median of rounds, microseconds per call), inference under
no_grad on the CPU.

    python benchmarks/compile_host_overhead.py [--blocks 40] [--rounds 9] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(torch.relu(self.linear(x))) + x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, default=40)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args()
    import danlu

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(8) for _ in range(args.blocks)]).eval()
    x = torch.randn(4, 8)
    variants = {"eager": model, "torch.compile": torch.compile(model), "danlu.compile": None}
    variants["danlu.compile"] = danlu.compile(model)
    times = {k: [] for k in variants}
    with torch.no_grad():
        ref = model(x)
        for f in variants.values():
            for _ in range(3):
                out = f(x)
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        for _ in range(args.rounds):
            for name, f in variants.items():
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    f(x)
                times[name].append((time.perf_counter() - t0) / args.calls * 1e6)
    params = sum(1 for _ in model.parameters())
    print(
        f"{args.blocks} blocks, {params} parameters, input 4x8; us per call (median of "
        f"{args.rounds} rounds of {args.calls} calls)"
    )
    print("| variant | us per call |")
    print("|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.0f} |")


if __name__ == "__main__":
    main()
