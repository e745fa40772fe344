"""Where the time of one step goes, per backend: host time, GPU kernel time, launches.

For a model of the GPU suite (benchmarks/gpu_models_zoo.py) this runs eager, torch.compile
and danlu.compile (bf16 autocast, inference or training step), then profiles a few steps of
each with torch.profiler and prints, per backend: the wall time per step, the summed CUDA
kernel time per step, the number of kernel launches per step, and the kernels that take the
most time. A step whose wall time is far above its kernel time is launch-bound (host work).

    python benchmarks/gpu_profile.py --model gpt2 --mode infer --out /tmp/profile
    python benchmarks/gpu_profile.py --model resnet50 --backends torch-ro,danlu-ro --host-profile

Backends: eager, torch, danlu, and torch-ro / danlu-ro (mode="reduce-overhead": CUDA graph
replays, where the host's work before each replay adds to the step).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_models_zoo import MODELS  # noqa: E402


def step_fn(fn, inputs, train, params):
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if train:
                for p in params:
                    p.grad = None
                fn(*inputs).backward()
            else:
                with torch.no_grad():
                    fn(*inputs)

    return step


# DANLU_PROFILE_KERNELS=1 labels each kernel with a range named after it, sizes appended
# ("danlu_red_sum_185 [64x1024 | r 784]"); the profiler shows the range on the GPU too
_LABEL = re.compile(r" \[[0-9x| r]+\]$")


def _label_range(e) -> bool:
    """A user annotation (a labelled range), not a kernel: counting it counts its kernel twice."""
    return bool(getattr(e, "is_user_annotation", False)) or bool(_LABEL.search(e.name))


def profile(step, iters):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / iters * 1e3
    # host time a step: steps issued back to back with no wait; few enough that their
    # launches fit in the device's queue (an issue that blocks on a full queue would count
    # GPU time), so this is what the host spends, guards and wrapper included
    host_steps = 3
    t = time.perf_counter()
    for _ in range(host_steps):
        step()
    host = (time.perf_counter() - t) / host_steps * 1e3
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    kernels = {}
    for e in p.events():
        if _label_range(e):
            continue
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += e.device_time / 1e3
    gpu = sum(v[1] for v in kernels.values()) / iters
    launches = sum(v[0] for v in kernels.values()) / iters
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1][1])
    top = ranked[:30]
    groups = {}
    for name, (count, ms) in kernels.items():
        g = groups.setdefault(kernel_group(name), [0, 0.0])
        g[0] += count / iters
        g[1] += ms / iters
    return {
        "wall_ms": round(wall, 3),
        "host_ms": round(host, 3),
        "kernel_ms": round(gpu, 3),
        "launches": launches,
        "groups": {k: (round(c), round(ms, 3)) for k, (c, ms) in sorted(groups.items())},
        "top": [(n[:90], c / iters, round(ms / iters, 3)) for n, (c, ms) in top],
        # every generated kernel, to map a slow one to the debug dump's source by name
        "generated": [
            (n, c / iters, round(ms / iters, 4))
            for n, (c, ms) in ranked
            if kernel_group(n) == "generated (Triton)"
        ],
    }


def host_profile(step, iters, path, rows=40):
    """cProfile over ``iters`` steps: where the host time of a step goes (Python side).
    With ``iters=1`` on a fresh compiler this is the first call: where compile time goes
    (Triton's builds run in worker processes and show as waiting)."""
    import cProfile
    import io
    import pstats

    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(rows)
    stats.sort_stats("cumulative").print_stats(rows)
    with open(path, "w") as f:
        f.write(buf.getvalue())
    print(buf.getvalue()[:6000], flush=True)


def kernel_group(name: str) -> str:
    """Which library or generator a CUDA kernel came from, by its name."""
    low = name.lower()
    if name.startswith(("kernel", "danlu_", "triton_")):
        return "generated (Triton)"
    if any(k in low for k in ("sdpa", "flash", "fmha", "attention")):
        return "attention library"
    if any(k in low for k in ("conv", "cudnn", "implicit_gemm", "winograd")):
        return "convolution library"
    if any(k in low for k in ("nvjet", "gemm", "cutlass", "xmma", "cublas", "sm90_", "wgmma")):
        return "matmul library"
    if "memcpy" in low or "memset" in low:
        return "copies"
    return "other ATen"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="gpt2")
    p.add_argument("--mode", default="infer", choices=["infer", "train"])
    p.add_argument("--backends", default="eager,torch,danlu")
    p.add_argument("--danlu-mode", default=None)
    p.add_argument(
        "--danlu-options",
        default="{}",
        help="JSON dict of danlu.compile options for the backend 'danlu-opt' (an A/B of one "
        "option beside plain danlu in one run: --backends danlu,danlu-opt --danlu-options "
        "'{\"row_block_partials\": false}')",
    )
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--out", default="/tmp/danlu-profile")
    p.add_argument(
        "--host-profile",
        action="store_true",
        help="also run cProfile over a few steps of each compiled backend and print the top host functions",
    )
    p.add_argument(
        "--compile-profile",
        action="store_true",
        help="run danlu's first call (the compile) under cProfile; writes "
        "compile_<model>_<mode>.txt",
    )
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import danlu

    train = args.mode == "train"
    module, make_inputs, info = MODELS[args.model].build(False)
    module = module.cuda().train(train)
    inputs = tuple(x.cuda() for x in make_inputs(torch.Generator().manual_seed(0)))
    params = [q for q in module.parameters() if q.requires_grad]
    results = {}
    for b in args.backends.split(","):
        if b == "eager":
            fn = module
        elif b == "torch":
            fn = torch.compile(module)
        elif b == "torch-ro":
            fn = torch.compile(module, mode="reduce-overhead")
        elif b == "danlu-ro":
            fn = danlu.compile(module, mode="reduce-overhead")
        elif b == "danlu-opt":
            danlu.reset()  # a fresh compile with the options, not the plain backend's graphs
            fn = danlu.compile(module, options=json.loads(args.danlu_options))
        else:
            fn = danlu.compile(module, mode=args.danlu_mode)
        step = step_fn(fn, inputs, train, params)
        t = time.perf_counter()
        if args.compile_profile and b.startswith("danlu"):
            path = os.path.join(args.out, f"compile_{args.model}_{args.mode}.txt")
            host_profile(step, 1, path, rows=80)
        else:
            step()
        torch.cuda.synchronize()
        first = time.perf_counter() - t
        if b.startswith("danlu"):
            stats = danlu.CompileStats.current()
            phases = stats.phases
            print("danlu compile phases:", {k: round(v, 1) for k, v in phases.items()})
            # the rest of the first call: the compiled graphs' first runs (binary loads,
            # autotuning), and what neither counts
            runs = stats.first_run_seconds() or 0.0
            print(
                f"  first runs {runs:.1f} s; outside phases and first runs "
                f"{first - sum(phases.values()) - runs:.1f} s"
            )
            for k in danlu.CompileStats.current().kernel_graphs:
                compiled = k._compiled() if k._compiled is not None else None
                report = getattr(compiled, "report", None) or {}
                print(f"  {k.label}: precompiled {report.get('precompiled')}", flush=True)
        r = profile(step, args.iters)
        r["first_call_s"] = round(first, 1)
        results[b] = r
        print(
            f"== {args.model} {args.mode} {b}: wall {r['wall_ms']} ms, kernels "
            f"{r['kernel_ms']} ms, {r['launches']:.0f} launches, first call {first:.1f} s",
            flush=True,
        )
        for group, (count, ms) in r["groups"].items():
            print(f"   {ms:8.3f} ms  x{count:<5}  [{group}]", flush=True)
        for name, count, ms in r["top"]:
            print(f"   {ms:8.3f} ms  x{count:<5.0f} {name}", flush=True)
        if args.host_profile and b != "eager":  # torch.compile's too, to compare host work
            host_profile(
                step, args.iters, os.path.join(args.out, f"host_{args.model}_{args.mode}_{b}.txt")
            )
        torch._dynamo.reset()
    with open(os.path.join(args.out, f"profile_{args.model}_{args.mode}.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = profile_diff(args.model, args.mode, results)
    with open(os.path.join(args.out, f"profile_{args.model}_{args.mode}.md"), "w") as f:
        f.write(table)
        for b, r in results.items():  # the full lists stay out of the printed table
            if r.get("generated"):
                f.write(f"\n\n#### {b}: every generated kernel, ms (launches) a step\n\n")
                f.writelines(f"- {ms:.4f} ({c:g}) {n}\n" for n, c, ms in r["generated"])
    print(table, flush=True)


def profile_diff(model: str, mode: str, results: dict) -> str:
    """One markdown table: GPU milliseconds and launches a step per kernel kind, one column
    per backend, and the host gap (wall time not covered by kernels; launch-bound steps have
    a large one)."""
    backends = list(results)
    kinds = sorted({k for r in results.values() for k in r["groups"]})
    head = "| kind | " + " | ".join(backends) + " |"
    rows = [f"### {model} {mode}: GPU ms (launches) a step", "", head]
    rows.append("|---" * (len(backends) + 1) + "|")
    for kind in kinds:
        cells = []
        for b in backends:
            count, ms = results[b]["groups"].get(kind, (0, 0.0))
            cells.append(f"{ms:.2f} ({count})" if count else "—")
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    rows.append(
        "| all kernels | "
        + " | ".join(
            f"{results[b]['kernel_ms']:.2f} ({results[b]['launches']:.0f})" for b in backends
        )
        + " |"
    )
    rows.append(
        "| wall time a step | "
        + " | ".join(f"{results[b]['wall_ms']:.2f}" for b in backends)
        + " |"
    )
    rows.append(
        "| host time a step (no waiting) | "
        + " | ".join(f"{results[b].get('host_ms', float('nan')):.2f}" for b in backends)
        + " |"
    )
    rows.append(
        "| host gap (wall - kernels) | "
        + " | ".join(f"{results[b]['wall_ms'] - results[b]['kernel_ms']:.2f}" for b in backends)
        + " |"
    )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
