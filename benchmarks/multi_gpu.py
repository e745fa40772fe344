"""Issue 25's run: GPT-2 and a LLaMA-style model trained with DDP and with FSDP2, eager vs
torch.compile vs danlu.compile, one process per GPU, side by side in one run.

    torchrun --nproc_per_node 2 benchmarks/multi_gpu.py --device cuda --out /tmp/mg
    python benchmarks/multi_gpu.py --spawn 2 --small --device cpu     # gloo smoke run

For each model, wrapper and compiler (same initial weights, same data per rank): ``--steps``
training steps with AdamW under bf16 autocast, whose losses are compared with eager's; then
``--timed`` steps after ``--warmup``, timed between synchronizations (median step time,
tokens a second over all ranks, peak memory of a step); the first step's time as the compile
time; with ``--profile``, a torch.profiler trace of three steps, from which the share of the
communication kernels' time that overlaps other kernels is read. Rank 0 prints one table and
writes ``results.json`` under ``--out`` (and, with ``--traces``, the Chrome traces). A configuration that fails is a
row with its error; the others still run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from distributed import add_rank_arguments, run_ranks, start_rank, sync_device  # noqa: E402
from gpu_models_zoo import MODELS  # noqa: E402


def _blocks(step_module):
    """The repeated transformer blocks of a suite language model (what FSDP2 shards one by
    one)."""
    inner = step_module.model
    for path in ("transformer.h", "model.layers"):
        obj = inner
        for name in path.split("."):
            obj = getattr(obj, name, None)
        if obj is not None:
            return list(obj)
    raise ValueError(f"no transformer blocks found in {type(inner).__name__}")


def wrap(kind, module, device):
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return DDP(module, device_ids=ids)
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for block in _blocks(module):
            fully_shard(block)
        fully_shard(module)
        return module
    raise ValueError(f"unknown wrapper {kind!r} (ddp, fsdp2)")


def compiled(backend, module):
    if backend == "danlu":
        import danlu

        danlu.reset()
        return danlu.compile(module)
    if backend == "torch":
        torch._dynamo.reset()
        return torch.compile(module)
    if backend == "eager":
        return module
    raise ValueError(f"unknown backend {backend!r} (eager, torch, danlu)")


def comm_overlap(prof) -> dict | None:
    """From a profile's GPU kernels: the communication kernels' time (NCCL), and the share
    of it during which some other kernel ran (what overlaps compute)."""
    kernels = [
        e
        for e in prof.events()
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type)
    ]
    comm = [(e.time_range.start, e.time_range.end) for e in kernels if "nccl" in e.name.lower()]
    other = sorted(
        (e.time_range.start, e.time_range.end) for e in kernels if "nccl" not in e.name.lower()
    )
    if not comm:
        return None
    merged = []
    for s, e in other:  # the union of the other kernels' intervals
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    total = sum(e - s for s, e in comm)
    covered = sum(max(0, min(e, me) - max(s, ms)) for s, e in comm for ms, me in merged)
    return {"comm_us": total, "overlapped": covered / total if total else 0.0}


def run_config(model_name, kind, backend, base, make_inputs, info, args, device):
    module = wrap(kind, copy.deepcopy(base).to(device), device)
    fn = compiled(backend, module)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1000 + dist.get_rank())
    batches = [make_inputs(gen)[0].to(device) for _ in range(args.steps)]

    def step(ids):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = fn(ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    losses, first_s = [], None
    for i, ids in enumerate(batches):  # the agreement steps; the first one compiles
        sync_device(device)
        t0 = time.perf_counter()
        losses.append(float(step(ids)))
        sync_device(device)
        if i == 0:
            first_s = time.perf_counter() - t0
    ids = batches[0]
    for _ in range(args.warmup):
        step(ids)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base_mem = torch.cuda.memory_allocated(device)
    times = []
    for _ in range(args.timed):
        sync_device(device)
        t0 = time.perf_counter()
        step(ids)
        sync_device(device)
        times.append(time.perf_counter() - t0)
    row = {
        "losses": losses,
        "step_ms": statistics.median(times) * 1e3,
        "first_step_s": first_s,
        "tokens_per_s": dist.get_world_size() * ids.numel() / statistics.median(times),
    }
    if device.type == "cuda":
        row["peak_gb"] = (torch.cuda.max_memory_allocated(device) - base_mem) / 2**30
    if args.profile and device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step(ids)
            sync_device(device)
        row["overlap"] = comm_overlap(prof)
        if args.traces and args.out and dist.get_rank() == 0:
            prof.export_chrome_trace(
                str(pathlib.Path(args.out) / f"trace_{model_name}_{kind}_{backend}.json")
            )
    if backend == "danlu":
        import danlu

        stats = danlu.CompileStats.current()
        row["graphs"], row["graph_breaks"] = len(stats.graphs), stats.graph_breaks
    return row


def main_worker(args):
    rank, device = start_rank(args)
    if args.out and rank == 0:
        pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = []
    for model_name in args.models.split(","):
        torch.manual_seed(0)
        base, make_inputs, info = MODELS[model_name].build(args.small)
        base.train()
        for kind in args.wraps.split(","):
            for backend in args.backends.split(","):
                dist.barrier()
                row = {"model": model_name, "wrap": kind, "backend": backend}
                try:
                    row.update(
                        run_config(model_name, kind, backend, base, make_inputs, info, args, device)
                    )
                except Exception:  # noqa: BLE001 - the row carries the error, the run goes on
                    row["error"] = traceback.format_exc()[-2000:]
                rows.append(row)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    if rank == 0:
        report(rows, args)
    dist.destroy_process_group()


def report(rows, args):
    eager = {
        (r["model"], r["wrap"]): r for r in rows if r["backend"] == "eager" and "error" not in r
    }
    print(f"world {dist.get_world_size()}, {args.device}, bf16 autocast, {args.timed} timed steps")
    print(
        "| model | wrapper | compiler | step ms | speedup vs eager | tokens/s | peak GB "
        "| first step s | max loss diff vs eager | comm overlapped | graphs / breaks |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            last = r["error"].strip().splitlines()[-1][:160]
            print(f"| {r['model']} | {r['wrap']} | {r['backend']} | error: {last} |")
            continue
        e = eager.get((r["model"], r["wrap"]))
        speed = f"{e['step_ms'] / r['step_ms']:.2f}x" if e else "-"
        diff = (
            f"{max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(r['losses'], e['losses'])):.1e}"
            if e
            else "-"
        )
        ov = r.get("overlap")
        ov = f"{ov['overlapped']:.2f} of {ov['comm_us'] / 1e3:.1f} ms" if ov else "-"
        peak = f"{r['peak_gb']:.2f}" if "peak_gb" in r else "-"
        graphs = f"{r['graphs']} / {r['graph_breaks']}" if "graphs" in r else "-"
        print(
            f"| {r['model']} | {r['wrap']} | {r['backend']} | {r['step_ms']:.2f} | {speed} "
            f"| {r['tokens_per_s']:.0f} | {peak} | {r['first_step_s']:.1f} | {diff} | {ov} "
            f"| {graphs} |"
        )
    if args.out:
        out = pathlib.Path(args.out) / "results.json"
        out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--wraps", default="ddp,fsdp2")
    ap.add_argument("--backends", default="eager,torch,danlu")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="the suite's small sizes")
    ap.add_argument("--steps", type=int, default=10, help="steps whose losses are compared")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="CUDA: trace 3 steps, read overlap")
    ap.add_argument("--traces", action="store_true", help="with --profile: write Chrome traces")
    add_rank_arguments(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    run_ranks(main_worker, args)


if __name__ == "__main__":
    main()
