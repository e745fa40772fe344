"""Is a compiled training step host-bound, and is its spread the garbage collector's? For each
backend: the host time of a step (forward, loss, backward issued with no wait: what the CPU
spends), the synced step (synchronize, step, synchronize: the suite's timing) with the
collector on and off, and how many collections ran while the synced steps were timed.

    python benchmarks/probes/train_step_host.py --models resnet50 --backends danlu,torch

A step whose host time is near its synced time is host-bound: the GPU waits on the launches.
On CUDA each backend's row also splits a synced step into its forward and backward: the
host's time to issue each and the GPU's time between events around each (``phases``).

``--processes K``: each backend's row K times, each in a fresh process, the backends
alternating (danlu, torch, danlu, ...). A step's host time can differ by several ms between
two processes of the same program on one machine (run 87); one process per backend cannot
tell that from the compiler. The summary gives each backend's synced-step medians over its
processes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gpu_models_zoo import MODELS  # noqa: E402


def step_parts(fn, params, inputs, device, dtype):
    """The training step as (forward, backward) callables, for ``phases``."""
    state = {}

    def forward():
        for q in params:
            q.grad = None
        with torch.autocast(device.type, dtype=dtype):
            state["loss"] = fn(*inputs)

    def backward():
        state.pop("loss").backward()

    return forward, backward


def phases(parts, steps):
    """Where a synced step's time goes (CUDA): per phase, the host's time to issue it and the
    GPU's time from the phase's start event to its end event, medians in ms. GPU time above
    host time: the GPU is behind (that phase is GPU-bound); the first event's distance from
    the step's start: how long the GPU waited for its first launch."""
    forward, backward = parts
    rows = []
    for _ in range(steps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ev[0].record()
        forward()
        t1 = time.perf_counter()
        ev[1].record()
        backward()
        t2 = time.perf_counter()
        ev[2].record()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        rows.append(
            (
                (t1 - t0) * 1e3,
                ev[0].elapsed_time(ev[1]),
                (t2 - t1) * 1e3,
                ev[1].elapsed_time(ev[2]),
                (t3 - t0) * 1e3,
            )
        )
    names = ("forward_host", "forward_gpu", "backward_host", "backward_gpu", "synced")
    return {n: round(statistics.median(col), 3) for n, col in zip(names, zip(*rows))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50")
    p.add_argument("--backends", default="danlu,torch")
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="the small models (a CPU smoke run)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--processes", type=int, default=1, help="fresh processes per backend")
    args = p.parse_args()
    if args.processes > 1:
        return by_process(args)
    device = torch.device(args.device)
    dtype = torch.bfloat16

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    collections = [0]
    gc.callbacks.append(
        lambda phase, info: collections.__setitem__(0, collections[0] + (phase == "start"))
    )
    results = {}
    for name in args.models.split(","):
        module, make_inputs, _ = MODELS[name].build(args.small)
        module = module.to(device).train()
        inputs = tuple(x.to(device) for x in make_inputs(torch.Generator().manual_seed(0)))
        params = [q for q in module.parameters() if q.requires_grad]
        for backend in args.backends.split(","):
            if backend == "danlu":
                import danlu

                danlu.reset()
                fn = danlu.compile(module)
            elif backend == "torch":
                torch._dynamo.reset()
                fn = torch.compile(module)
            else:
                fn = module

            parts = step_parts(fn, params, inputs, device, dtype)

            def step(parts=parts):
                parts[0]()
                parts[1]()

            for _ in range(3):
                step()
            sync()
            hosts = []
            for _ in range(args.steps):
                sync()
                t = time.perf_counter()
                step()
                hosts.append((time.perf_counter() - t) * 1e3)
                sync()
            row = {"host_ms": round(statistics.median(hosts), 3)}
            for gc_on in (True, False):
                if not gc_on:
                    gc.disable()
                collections[0] = 0
                times = []
                for _ in range(args.steps):
                    sync()
                    t = time.perf_counter()
                    step()
                    sync()
                    times.append((time.perf_counter() - t) * 1e3)
                gc.enable()
                key = "gc_on" if gc_on else "gc_off"
                row[key] = {
                    "median_ms": round(statistics.median(times), 3),
                    "min_ms": round(min(times), 3),
                    "max_ms": round(max(times), 3),
                    "collections": collections[0],
                }
            if device.type == "cuda":
                row["phases"] = phases(parts, args.steps)
            row["gc_counts_now"] = gc.get_count()
            row["tracked_objects"] = len(gc.get_objects())
            print(name, backend, row, flush=True)
            results[f"{name} {backend}"] = row
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


def by_process(args):
    """Each (model, backend) row ``args.processes`` times, each in a fresh process of this
    script, the backends alternating; rows as ``"<model> <backend> #<i>"``, then a summary."""
    results, synced = {}, {}
    for i in range(args.processes):
        for backend in args.backends.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "row.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--models", args.models]
                cmd += ["--backends", backend, "--device", args.device, "--steps"]
                cmd += [str(args.steps), "--out", out] + (["--small"] if args.small else [])
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{backend} #{i}: failed\n{done.stderr[-2000:]}", flush=True)
                    continue
                with open(out) as f:
                    rows = json.load(f)
            for k, row in rows.items():
                results[f"{k} #{i}"] = row
                synced.setdefault(k, []).append(row["gc_on"]["median_ms"])
                print(f"{k} #{i}", row.get("phases") or row["gc_on"], flush=True)
    summary = {
        k: {
            "synced_median_ms": [round(v, 3) for v in vs],
            "median_of_processes": round(statistics.median(vs), 3),
        }
        for k, vs in synced.items()
    }
    for k, v in summary.items():
        print(k, v, flush=True)
    results["summary"] = summary
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
