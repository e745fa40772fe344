"""Interleaved medians of one CPU model-set case: eager, danlu.compile and torch.compile timed
round-robin in one process (the harness's models and step), so drift in machine load hits all
three alike. Prints three rounds of speedups over eager.

    python benchmarks/cpu_interleaved.py llama train [--steps 30] [--no-torch]
"""

from __future__ import annotations

import argparse
import time

import harness
import suites
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("mode", choices=["infer", "train"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="leave torch.compile out")
    args = ap.parse_args()
    import danlu

    train = args.mode == "train"
    case = next(c for c in suites.get("cpu10", "cpu") if c.name == args.case and c.train == train)
    model, inputs = case.make_model(), case.make_inputs()
    model.train(train)
    fns = {"eager": model, "danlu": danlu.compile(model)}
    if not args.no_torch:
        fns["torch.compile"] = torch.compile(model)
    for f in fns.values():
        harness.step_fn(f, inputs, train)

    def median_ms(f):
        for _ in range(5):
            harness.step_fn(f, inputs, train)
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            harness.step_fn(f, inputs, train)
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2] * 1e3

    for _ in range(args.rounds):
        ms = {k: median_ms(f) for k, f in fns.items()}
        ratios = " ".join(f"{k} {ms['eager'] / v:.3f}x" for k, v in ms.items() if k != "eager")
        print(f"{args.case} {args.mode}: {ratios} (eager {ms['eager']:.2f} ms)")


if __name__ == "__main__":
    main()
