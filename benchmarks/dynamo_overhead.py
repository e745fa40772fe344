"""Per-call overhead of a cached compiled function on a guard hit.

Variants, timed interleaved in one run (median of rounds, microseconds per call):

- eager: the plain function / module call;
- torch.compile(backend="eager"): PyTorch's own capture, running the captured graph as is
  (the reference);
- danlu_dynamo.optimize("eager"): ours, same backend convention (the default bytecode path:
  C frame hook, generated check function, transformed code, runner);
- danlu_dynamo segments: ours through the earlier segment path
  (``config.capture_path = "segments"``), for comparison.

Cases: small functions with 1, 2 and 3 tensor arguments, and a small nn.Module with a few
parameters. Inputs are tiny so the tensor work is small and the per-call machinery shows.

    python benchmarks/dynamo_overhead.py [--rounds 15] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import danlu_dynamo
from danlu_dynamo import config


def f1(x):
    return torch.relu(x) + 1


def f2(x, y):
    return torch.sin(x) * y


def f3(x, y, z):
    return (x + y) * z - x


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.l2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def cases():
    torch.manual_seed(0)
    t = [torch.randn(4, 8) for _ in range(3)]
    mod = Small().eval()
    return [
        ("fn, 1 tensor arg", f1, (t[0],)),
        ("fn, 2 tensor args", f2, (t[0], t[1])),
        ("fn, 3 tensor args", f3, (t[0], t[1], t[2])),
        ("nn.Module, 2 Linear (4 params)", mod, (t[0],)),
    ]


def time_calls(fn, args, calls, path="bytecode"):
    config.capture_path = path
    try:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        return (time.perf_counter() - t0) / calls * 1e6
    finally:
        config.capture_path = "bytecode"


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=2000)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with torch.no_grad():
        for name, fn, args in cases():
            variants = {
                "eager": fn,
                "torch.compile": torch.compile(fn, backend="eager"),
                "danlu_dynamo": danlu_dynamo.optimize("eager")(fn),
                "segments": danlu_dynamo.optimize("eager")(fn),
            }
            path = {"segments": "segments"}
            ref = fn(*args)
            for k, v in variants.items():  # compile, then warm up the hit path
                config.capture_path = path.get(k, "bytecode")
                for _ in range(3):
                    out = v(*args)
                config.capture_path = "bytecode"
                assert torch.equal(out, ref)
                time_calls(v, args, a.calls // 4, path.get(k, "bytecode"))
            times = {k: [] for k in variants}
            for _ in range(a.rounds):
                for k, v in variants.items():
                    times[k].append(time_calls(v, args, a.calls, path.get(k, "bytecode")))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((name, med))
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, 1 thread, no_grad")
    print(f"median of {a.rounds} interleaved rounds of {a.calls} calls; us per call\n")
    print(
        "| case | eager | torch.compile(eager) | danlu_dynamo(eager) | danlu segments "
        "| torch.compile - eager | danlu - eager | segments - eager "
        "| danlu / torch.compile overhead |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, m in rows:
        e, t, d, s = m["eager"], m["torch.compile"], m["danlu_dynamo"], m["segments"]
        print(
            f"| {name} | {e:.2f} | {t:.2f} | {d:.2f} | {s:.2f} | +{t - e:.2f} | +{d - e:.2f} "
            f"| +{s - e:.2f} | {(d - e) / (t - e):.2f}x |"
        )


if __name__ == "__main__":
    main()
