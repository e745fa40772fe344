"""How long the Triton build workers take to start, and what in them takes it.

A cold GPU compile waits for its pool of build workers (spawned processes) before the first
kernel builds; the compile reports show ``precompile wall_s`` far above the builds' own
time over the workers (ViT inference on the H200: 6.3 s of wall for 9.7 s of builds on 16
workers). This times, on the machine it runs on: one bare interpreter start, the imports a
worker makes (torch, triton), a CUDA context, and the whole pool of N workers becoming
ready, with and without each worker's CUDA context, and the device memory the pool holds,
for workers spawned (each imports torch) and forked from one spawned helper process (torch
imported once; what the compiler does). A fork server, tried once, blocked the caller on its
first start until it had imported torch (docs/benchmarks.md, thirteenth session).

    python benchmarks/worker_startup.py --workers 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def timed_python(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return round(time.perf_counter() - t, 2)


def _device_free_gib():
    import torch

    if not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info()
    return free / 2**30


def pool_ready(workers: int, cuda_device, method: str) -> dict:
    """Seconds until the first of ``workers`` workers answered and until all of them had
    (each held a 1 s job), and the device memory they hold (their CUDA contexts, if they
    open one). ``method``: "helper" (workers forked from one helper process: what the
    compiler uses) or "spawn" (each worker a spawned process)."""
    from danlu_inductor.codegen.triton import precompile

    precompile.shutdown()
    chosen = precompile._make_pool
    if method == "spawn":
        precompile._make_pool = precompile.spawned_pool
    try:
        before = _device_free_gib()
        t = time.perf_counter()
        pool = precompile._pool(workers, cuda_device)
        with precompile.without_main():
            first = pool.submit(precompile._ready)
            rest = [pool.submit(time.sleep, 1.0) for _ in range(workers - 1)]
        first.result()
        took = round(time.perf_counter() - t, 2)
        for f in rest:
            f.result()
        every = round(time.perf_counter() - t - 1.0, 2)
        after = _device_free_gib()
        built = _build_on(pool_workers=workers, cuda_device=cuda_device)
        after_builds = _device_free_gib()
    finally:
        precompile.shutdown()
        precompile._make_pool = chosen
    held = None if before is None else round(before - after, 2)
    out = {"first_s": took, "all_s (approx.)": every, "device_gib_held": held}
    if built is not None:
        out.update(built)
        out["device_gib_held_after_builds"] = round(before - after_builds, 2)
    return out


KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_one(in_ptr0, out_ptr1, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr1 + xindex, tl.load(in_ptr0 + xindex, xmask) + 1.0, xmask)
"""


def _build_on(pool_workers: int, cuda_device):
    """Real builds on the pool (a small kernel, 32 configs: every worker builds), where a GPU
    is there: what a worker's build itself opens on the device (a CUDA context or none)."""
    import tempfile

    import torch

    from danlu_inductor.codegen.triton import precompile

    if cuda_device is None or not torch.cuda.is_available():
        return None
    folder = tempfile.mkdtemp(prefix="worker-startup-")
    path = f"{folder}/add_one_kernels.py"
    with open(path, "w") as f:
        f.write(KERNEL)
    configs = [
        (x, None, w) for x in (64, 128, 256, 512, 1024, 2048, 4096, 8192) for w in (1, 2, 4, 8)
    ]
    t = time.perf_counter()
    out = precompile.precompile(
        path,
        [("add_one", configs, ["float32", "float32"], [4096])],
        cuda_device=cuda_device,
        workers=pool_workers,
    )
    errors = [err for _, err, _ in out["add_one"] if err]
    return {"builds_s (32 configs)": round(time.perf_counter() - t, 2), "build_errors": errors[:2]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--methods", default="spawn,helper", help="pools to time: spawn, helper")
    args = p.parse_args()
    out = {
        "python": timed_python("pass"),
        "import torch": timed_python("import torch"),
        "import triton": timed_python("import triton"),
        "import torch, triton": timed_python("import torch, triton"),
    }
    import torch  # noqa: F401  (the parent of a compile has it)

    cuda = torch.cuda.is_available()
    if cuda:
        out["torch + CUDA context"] = timed_python("import torch; torch.cuda.set_device(0)")
        torch.cuda.init()
    for method in args.methods.split(","):
        for device in [0, None] if cuda else [None]:
            key = f"{method} pool of {args.workers}, CUDA device {device}"
            out[key] = pool_ready(args.workers, device, method)
            out[key + " (again)"] = pool_ready(args.workers, device, method)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
