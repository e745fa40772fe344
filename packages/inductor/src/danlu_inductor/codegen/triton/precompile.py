"""Compile a graph's Triton kernels at once, in worker processes.

Each job is one kernel of a module on disk and the launch configs it may run with. On a
GPU a worker compiles each config through the kernel's own JIT (``warmup``: compile, no
launch), with the argument dtypes and sizes the wrapper will pass, so the binaries land in
Triton's on-disk cache under the key the first real launch computes. With an explicit
``target`` (for example ``("cuda", 90, 32)``) a worker compiles ahead of time for that
architecture instead (no GPU needed); tests use that to prove every kernel compiles.

Each config is a job of its own, the configs of reductions (the slowest to build) first, so
the pool stays busy to the end. Workers fork from one helper process that imports torch
once (build_pool.py), started once and reused; ``warm_up`` starts them (seconds) while the
first graph is still being lowered, so that the first ``precompile`` finds them ready. They compile with the interpreter
off, whatever the parent runs with: kernels that the parent runs under ``TRITON_INTERPRET=1``
still compile for a real target. They start without the user's main module: a new
process would otherwise import it and run a script's top-level code (the model, its
training loop) again in every worker, or fail at once when that code compiles again
("An attempt has been made to start a new process before ... bootstrapping").
"""

from __future__ import annotations

import atexit
import concurrent.futures
import importlib
import importlib.util
import multiprocessing
import os
import sys
import time

from danlu_inductor.codegen.triton.build_pool import HelperPool, without_main
from danlu_inductor.codegen.triton.cache_folder import cache_root

_INTERPRET = "TRITON_INTERPRET"
_POOL: concurrent.futures.ProcessPoolExecutor | None = None
_POOL_KEY = None


def _init_worker(cuda_device):
    os.environ.pop(_INTERPRET, None)
    mod = sys.modules.get("danlu_inductor.codegen.triton.device_math")
    if mod is not None:  # decorated under the interpreter before the variable was dropped
        importlib.reload(mod)
    if cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = only_device(cuda_device)
        _compile_only_driver()


def _compile_only_driver() -> None:
    """A worker builds and never launches, but Triton's JIT asks for the current stream even
    to build, and torch's answer opens a CUDA context: 0.5 GiB of device memory per worker, 8
    GiB for 16 (run 67, ``benchmarks/probes/worker_context.py``: the context appeared at
    that call and at no other step of a build). A worker's stream is the default one (0),
    never used. Best effort: without a GPU driver nothing changes."""
    try:
        from triton.runtime import driver

        driver.active.get_current_stream = _default_stream
    except Exception:
        pass


def _default_stream(*_args) -> int:
    return 0


def only_device(index: int, visible: str | None = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` under which a worker sees the caller's device ``index``
    as its only one (its device 0, the device Triton's driver builds for). ``visible``: the
    caller's own setting (default: this process's). Selecting the device this way opens no
    CUDA context: ``torch.cuda.set_device`` in each worker held 0.5 GiB of device memory per
    worker (8 GiB for 16 on an H100) and took 1-2 s of each worker's start."""
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(index)
    ids = [v.strip() for v in visible.split(",")]
    if not 0 <= index < len(ids) or not ids[index]:
        raise ValueError(f"CUDA device {index} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    return ids[index]


def _load(path):
    name = "danlu_precompile_" + os.path.basename(path)[:-3]
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def triton_env() -> dict:
    """This process's Triton variables (its cache folder, its compile options) as a job
    carries them to a worker, the interpreter switch left out."""
    return {k: v for k, v in os.environ.items() if k.startswith("TRITON_") and k != _INTERPRET}


def _use_env(env) -> None:
    for k in [k for k in os.environ if k.startswith("TRITON_") and k not in env]:
        del os.environ[k]
    os.environ.update(env)


def compile_job(path, kernel, configs, dtypes, sizes, target, env=None):
    """-> [(config, error or None, {"seconds", "ptx", "cubin"})] for one kernel. ``env``: the
    parent's ``triton_env()`` when the job was submitted: its cache folder, where its first
    launch looks the binaries up, and the options that go into a binary's cache key (a
    worker's own environment dates from its start)."""
    import torch

    if env is not None:
        _use_env(env)

    fn = getattr(_load(path), kernel)
    out = []
    for xblock, rblock, warps in configs:
        kwargs = {"XBLOCK": xblock}
        if rblock is not None:
            kwargs["RBLOCK"] = rblock
        t0 = time.perf_counter()
        info = {}
        try:
            if target is None:
                args = [getattr(torch, d) for d in dtypes] + list(sizes)
                compiled = fn.warmup(*args, grid=(1,), num_warps=warps, **kwargs)
                prebuild_launcher(compiled, info)
            else:
                import triton
                from triton.backends.compiler import GPUTarget
                from triton.compiler import ASTSource

                sig = dict(fn.danlu_meta["signature"])
                src = ASTSource(fn=fn, signature=sig, constexprs=kwargs)
                done = triton.compile(src, target=GPUTarget(*target), options={"num_warps": warps})
                info["ptx"] = f".target sm_{target[1]}" in done.asm.get("ptx", "")
                info["cubin"] = len(done.asm.get("cubin", b""))
            err = None
        except Exception as e:  # a config can exceed registers/shared memory; a bug shows too
            err = f"{type(e).__name__}: {str(e)[-600:]}"
        info["seconds"] = round(time.perf_counter() - t0, 3)
        out.append(((xblock, rblock, warps), err, info))
    return out


def prebuild_launcher(kernel, info, driver=None) -> None:
    """Build ``kernel``'s host launcher here, in the worker. Triton 3.4-3.6 generate a C
    launcher per kernel signature and build it with the host C compiler when the kernel first
    launches (cached on disk under the launcher's source); left to the first launch, those
    builds ran one after another in the main process (2.9 s of GPT-2 training's first call on
    the H200). Building it while the cubin is fresh puts it in the cache, so the main
    process only loads it. Where launchers need no build (Triton 3.9) this makes a small
    object. Best effort: a failure is noted in ``info`` and the first launch builds it."""
    try:
        if driver is None:
            from triton.runtime import driver as triton_driver

            driver = triton_driver.active
        make = getattr(driver, "launcher_cls", None)
        src, metadata = getattr(kernel, "src", None), getattr(kernel, "metadata", None)
        if make is None or src is None or metadata is None:
            return
        t0 = time.perf_counter()
        make(src, metadata)
        info["launcher_s"] = round(time.perf_counter() - t0, 3)
    except Exception as e:
        info["launcher_error"] = f"{type(e).__name__}: {str(e)[-300:]}"


def _make_pool(workers, cuda_device):
    """Workers forked from one helper process that imported torch once (build_pool.py);
    spawned ones where processes cannot fork."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return spawned_pool(workers, cuda_device)
    return HelperPool(workers, initializer=_init_worker, initargs=(cuda_device,))


def spawned_pool(workers, cuda_device):
    """Each worker a spawned process importing torch itself (what the compiler did before;
    ``benchmarks/worker_startup.py`` times both)."""
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(cuda_device,),
    )


def _pool(workers, cuda_device):
    global _POOL, _POOL_KEY
    key = (workers, cuda_device)
    if _POOL is not None and _POOL_KEY == key and getattr(_POOL, "alive", lambda: True)():
        return _POOL  # (a pool whose helper died is replaced: its jobs failed, not later ones)
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
    _POOL = _make_pool(workers, cuda_device)
    _POOL_KEY = key
    atexit.register(shutdown)  # stop the workers before the interpreter tears down
    return _POOL


def _ready():
    return os.getpid()


def warm_up(cuda_device=None, workers=None) -> None:
    """Start the worker processes now, without waiting for them. A helper pool forks all of
    its workers itself; a spawned pool starts a worker per job it cannot give to an idle
    one, so ``workers`` no-op jobs start them all."""
    workers = workers or default_workers()
    if workers == 1 or os.environ.get(_INTERPRET, "0") == "1":
        return
    fresh = _POOL is None or _POOL_KEY != (workers, cuda_device)
    if not fresh:
        return
    cache_root()  # TRITON_CACHE_DIR set before the workers copy the environment
    pool = _pool(workers, cuda_device)
    if isinstance(pool, HelperPool):
        return
    with without_main():
        for _ in range(workers):
            pool.submit(_ready)


def default_workers() -> int:
    env = os.environ.get("DANLU_COMPILE_THREADS")
    if env:
        return max(1, int(env))
    # compiling is one process per job, so a GPU host's cores are all worth using (half of
    # them left the H200 host's 16 idle while 1000+ configs compiled); a small machine
    # keeps a core for everything else
    cpus = os.cpu_count() or 2
    return max(1, min(32, cpus if cpus >= 8 else cpus // 2))


def precompile(path, jobs, target=None, cuda_device=None, workers=None, slow_first=(), stats=None):
    """``jobs``: [(kernel, [(XBLOCK, RBLOCK, num_warps)], [dtype name per pointer],
    [sizes])]. -> {kernel: [(config, error or None, info)]}, configs in the order given.
    Each config compiles as a job of its own, those of the kernels in ``slow_first`` first;
    a single config compiles in this process when it may (GPU target, no interpreter).
    ``stats`` (a dict), when given, receives what the builds took (for the graph report):
    wall seconds, jobs, configs, the sum and the longest of the per-config build seconds,
    and the workers."""
    if not jobs:
        return {}
    t0 = time.perf_counter()
    workers = workers or default_workers()
    path = str(path)
    interpreting = os.environ.get(_INTERPRET, "0") == "1"
    nconfigs = sum(len(j[1]) for j in jobs)
    # the binaries go where this process's launches will look for them: workers started before
    # the folder was chosen wrote them to Triton's default folder, and every config compiled a
    # second time, one after another, at its first launch (LLaMA training: a 75 s first call
    # on the H200 against 21 s of compile phases)
    env = triton_env()
    if not interpreting and (workers == 1 or (nconfigs == 1 and target is None)):
        out = {j[0]: compile_job(path, *j, target) for j in jobs}
    else:
        pool = _pool(workers, cuda_device)
        slow = set(slow_first)
        order = sorted(jobs, key=lambda j: j[0] not in slow)  # stable: the given order else
        with without_main():  # workers start while jobs are submitted
            futures = [
                (
                    kernel,
                    pool.submit(compile_job, path, kernel, [cfg], dtypes, sizes, target, env),
                )
                for kernel, cfgs, dtypes, sizes in order
                for cfg in cfgs
            ]
        out = {j[0]: [] for j in jobs}
        for kernel, f in futures:
            out[kernel].extend(f.result())
    if stats is not None:
        seconds = [info.get("seconds", 0.0) for rows in out.values() for _, _, info in rows]
        launchers = [
            info["launcher_s"] for rows in out.values() for *_, info in rows if "launcher_s" in info
        ]
        stats.update(
            wall_s=round(time.perf_counter() - t0, 2),
            jobs=len(jobs),
            configs=nconfigs,
            build_s_sum=round(sum(seconds), 2),
            build_s_max=round(max(seconds, default=0.0), 2),
            workers=workers,
        )
        if launchers:  # GPU builds: the host launchers built beside the cubins
            stats.update(launchers=len(launchers), launcher_s_sum=round(sum(launchers), 2))
    return out


def shutdown():
    global _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)
        _POOL = None
