"""DDP training step time, eager vs torch.compile vs danlu.compile, on N processes, and how
early the first gradient bucket is ready (what lets its all-reduce overlap the backward).

    torchrun --nproc_per_node 2 benchmarks/distributed.py            # gloo on CPU
    python benchmarks/distributed.py --spawn 2 --layers 4 --width 128 # the same, self-spawned
    torchrun --nproc_per_node 2 benchmarks/distributed.py --device cuda   # NCCL

For each compiler a DDP model (same initial weights) trains ``--steps`` steps; the step time is
the median over the steps after ``--warmup``. A DDP communication hook records when each
bucket is handed to the all-reduce; "first bucket" is that moment for the first bucket, as a
fraction of the backward's duration (1.0: only after the whole backward, no overlap possible;
lower: the all-reduce can run while the rest of the backward does). Rank 0 prints a table and
writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "packages/compile/tests"))
from distributed_cases import Transformer  # noqa: E402


def bucket_clock(ready: list):
    """A DDP comm hook that notes when each bucket is ready, then all-reduces it."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def clocked_allreduce(state, bucket):
        ready.append(time.perf_counter())
        return allreduce_hook(state, bucket)

    return clocked_allreduce


def run_one(label, model, args, device):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    ready: list[float] = []
    ddp.register_comm_hook(None, bucket_clock(ready))
    if label.startswith("danlu"):
        import danlu
        import danlu_dynamo.config

        # "danlu-unsplit": one piece per graph, for comparison (all gradients at the end)
        danlu_dynamo.config.ddp_split = label != "danlu-unsplit"
        danlu.reset()
        fn = danlu.compile(ddp)
    elif label == "torch.compile":
        torch._dynamo.reset()
        fn = torch.compile(ddp)
    else:
        fn = ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(dist.get_rank())
    times, first = [], []
    for step in range(args.warmup + args.steps):
        ids = torch.randint(0, 64, (args.batch, args.seq), generator=g).to(device)
        ready.clear()
        sync_device(device)
        t0 = time.perf_counter()
        loss = fn(ids)
        t1 = time.perf_counter()
        loss.backward()
        sync_device(device)
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad()
        sync_device(device)
        t3 = time.perf_counter()
        if step >= args.warmup:
            times.append(t3 - t0)
            if ready:
                first.append((ready[0] - t1) / max(t2 - t1, 1e-9))
    return {
        "step_ms": statistics.median(times) * 1e3,
        "first_bucket": statistics.median(first) if first else None,
        "buckets": len(ready),
        "loss": float(loss),
    }


def sync_device(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def start_rank(args) -> tuple[int, torch.device]:
    """This rank's number and device once its process group is up: NCCL on the GPU of its
    local rank (made current), gloo on the CPU with ``args.threads`` threads."""
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, args.threads))
    return rank, device


def main_worker(args):
    rank, device = start_rank(args)
    torch.manual_seed(0)
    base = Transformer(d=args.width, layers=args.layers).to(device)
    rows = {}
    for label in args.compilers.split(","):
        dist.barrier()
        rows[label] = run_one(label, copy.deepcopy(base), args, device)
    if rank == 0:
        eager = rows.get("eager", {}).get("step_ms")
        print(
            f"world {dist.get_world_size()}, {args.device}, Transformer d={args.width} "
            f"layers={args.layers}, batch {args.batch}x{args.seq}, buckets {args.bucket_mb} MB"
        )
        print("| compiler | step ms | speedup vs eager | buckets | first bucket ready at |")
        print("|---|---|---|---|---|")
        for label, r in rows.items():
            sp = f"{eager / r['step_ms']:.2f}x" if eager else "-"
            fb = (
                f"{r['first_bucket']:.2f} of the backward" if r["first_bucket"] is not None else "-"
            )
            print(f"| {label} | {r['step_ms']:.2f} | {sp} | {r['buckets']} | {fb} |")
        if args.out:
            pathlib.Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}))
    dist.destroy_process_group()


def _spawned(rank, world, port, worker, args):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    worker(args)


def add_rank_arguments(ap: argparse.ArgumentParser) -> None:
    """The options ``run_ranks`` and ``start_rank`` read."""
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    ap.add_argument("--spawn", type=int, default=0, help="start N processes (no torchrun)")


def run_ranks(worker, args):
    """``worker(args)`` in each rank: ``args.spawn`` processes started here on a free local
    port (torchrun's environment set for each), or this process alone under torchrun."""
    if not args.spawn:
        worker(args)
        return
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_spawned, args=(args.spawn, port, worker, args), nprocs=args.spawn)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compilers", default="eager,torch.compile,danlu,danlu-unsplit")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    add_rank_arguments(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    run_ranks(main_worker, args)


if __name__ == "__main__":
    main()
