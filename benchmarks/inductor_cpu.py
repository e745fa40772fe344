"""danlu-inductor on CPU, side by side with eager and torch.compile (inductor).

    python benchmarks/inductor_cpu.py [--cases layernorm,softmax,...] [--repeat 30]
                                      [--threads N] [--cpu-time] [--stat median|min]

Every case runs forward-only under torch.no_grad. Timing: warm-up (compile happens there and
is timed separately), then `repeat` rounds, each timing eager, torch.compile and danlu once
in turn (interleaved, so frequency changes hit all three alike); the median per system is
reported (`--stat min`: the fastest round). Speedup = eager median / system median. Compile time = first call wall time minus
one eager call. The geometric mean is over cases, unclipped.

On a machine shared with other work, wall-clock medians of multi-threaded calls mostly measure
the scheduler (a parallel region waits for its slowest, descheduled thread). `--threads 1
--cpu-time` times each call by the process's CPU time on one thread instead, which time spent
descheduled does not inflate; it compares the generated code, not the parallel speedup.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "packages/inductor/tests"))
from models import GPT2Small, ResNet18, TransformerBlock, randomize_bn  # noqa: E402

from danlu_inductor import inference_backend  # noqa: E402


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(x)


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)


class GeluMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def cases():
    torch.manual_seed(0)
    return {
        "layernorm": lambda: (LayerNorm(768), torch.randn(32, 128, 768)),
        "softmax": lambda: (Softmax(), torch.randn(32, 12, 128, 128)),
        "gelu_mlp": lambda: (GeluMLP(768), torch.randn(8, 128, 768)),
        "attention_block": lambda: (TransformerBlock(768, 12, ctx=256), torch.randn(4, 128, 768)),
        "resnet18": lambda: (randomize_bn(ResNet18()), torch.randn(1, 3, 224, 224)),
        "gpt2_small": lambda: (GPT2Small(ctx=256), torch.randint(0, 50257, (1, 128))),
    }


CLOCK = time.perf_counter
STAT = statistics.median


def timed(fn, x):
    t0 = CLOCK()
    fn(x)
    return CLOCK() - t0


def wall(fn, x):
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


def run_case(name, make, repeat):
    model, x = make()
    model.eval()
    systems = {"eager": model}
    with torch.no_grad():
        eager_once = min(wall(model, x) for _ in range(3))
        compile_s = {}
        torch._dynamo.reset()
        tc = torch.compile(model, backend="inductor")
        compile_s["torch.compile"] = wall(tc, x) - eager_once
        systems["torch.compile"] = tc
        dl = torch.compile(model, backend=inference_backend)
        compile_s["danlu"] = wall(dl, x) - eager_once
        systems["danlu"] = dl
        ref = model(x)
        for sname in ("torch.compile", "danlu"):
            got = systems[sname](x)
            ok = torch.allclose(got, ref, rtol=1e-3, atol=1e-3)
            if not ok:
                print(f"  !! {name}: {sname} differs from eager, max {(got - ref).abs().max():.3g}")
        for fn in systems.values():  # warm-up
            for _ in range(2):
                fn(x)
        samples = {s: [] for s in systems}
        for _ in range(repeat):
            for s, fn in systems.items():
                samples[s].append(timed(fn, x))
    med = {s: STAT(v) for s, v in samples.items()}
    return med, compile_s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default=",".join(cases()))
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--threads", type=int, default=None, help="torch and OpenMP threads")
    p.add_argument("--cpu-time", action="store_true", help="time by process CPU time")
    p.add_argument(
        "--stat",
        choices=("median", "min"),
        default="median",
        help="per-system statistic over the rounds; min approximates a quiet machine when "
        "other work shares the cores (the fastest round is the least disturbed one)",
    )
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    if args.threads is not None:
        torch.set_num_threads(args.threads)  # also OpenMP's count for the generated kernels
    global CLOCK, STAT
    if args.cpu_time:
        CLOCK = time.process_time
    if args.stat == "min":
        STAT = min
    clock = "process CPU time" if args.cpu_time else "wall clock"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {clock}, {args.stat}")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    rows = []
    table = cases()
    for name in args.cases.split(","):
        med, comp = run_case(name, table[name], args.repeat)
        sp_tc = med["eager"] / med["torch.compile"]
        sp_dl = med["eager"] / med["danlu"]
        rows.append((name, med, comp, sp_tc, sp_dl))
        print(
            f"{name:16s} eager {med['eager'] * 1e3:8.2f} ms | torch.compile "
            f"{med['torch.compile'] * 1e3:8.2f} ms ({sp_tc:5.2f}x, compile {comp['torch.compile']:6.1f} s)"
            f" | danlu {med['danlu'] * 1e3:8.2f} ms ({sp_dl:5.2f}x, compile {comp['danlu']:6.1f} s)"
            f" | load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    g_tc = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
    g_dl = math.exp(sum(math.log(r[4]) for r in rows) / len(rows))
    print(f"geomean speedup over eager: torch.compile {g_tc:.2f}x, danlu {g_dl:.2f}x")
    print()
    print(
        "| case | eager ms | torch.compile ms (speedup) | danlu ms (speedup) | compile s: torch.compile / danlu |"
    )
    print("|---|---|---|---|---|")
    for name, med, comp, sp_tc, sp_dl in rows:
        print(
            f"| {name} | {med['eager'] * 1e3:.2f} | {med['torch.compile'] * 1e3:.2f} ({sp_tc:.2f}x) | "
            f"{med['danlu'] * 1e3:.2f} ({sp_dl:.2f}x) | {comp['torch.compile']:.1f} / {comp['danlu']:.1f} |"
        )
    print(f"| **geomean** | | **{g_tc:.2f}x** | **{g_dl:.2f}x** | |")


if __name__ == "__main__":
    main()
