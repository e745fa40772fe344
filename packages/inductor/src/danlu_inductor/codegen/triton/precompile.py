"""Compile a graph's Triton kernels at once, in worker processes.

Each job is one kernel of a module on disk and the launch configs it may run with. On a
GPU a worker compiles each config through the kernel's own JIT (``warmup``: compile, no
launch), with the argument dtypes and sizes the wrapper will pass, so the binaries land in
Triton's on-disk cache under the key the first real launch computes. With an explicit
``target`` (for example ``("cuda", 90, 32)``) a worker compiles ahead of time for that
architecture instead (no GPU needed); tests use that to prove every kernel compiles.

Workers are spawned processes, started once and reused. They compile with the interpreter
off, whatever the parent runs with: kernels that the parent runs under ``TRITON_INTERPRET=1``
still compile for a real target. They start without the user's main module: a spawned
process would otherwise import it and run a script's top-level code (the model, its
training loop) again in every worker, or fail at once when that code compiles again
("An attempt has been made to start a new process before ... bootstrapping").
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import importlib
import importlib.util
import multiprocessing
import os
import sys
import threading
import time
import types

_POOL: concurrent.futures.ProcessPoolExecutor | None = None
_POOL_KEY = None
_SPAWN_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_main():
    """While workers start: a ``__main__`` with no file and no spec, so that multiprocessing
    gives the new process nothing of the user's main module to import."""
    with _SPAWN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _init_worker(cuda_device):
    os.environ.pop("TRITON_INTERPRET", None)
    mod = sys.modules.get("danlu_inductor.codegen.triton.device_math")
    if mod is not None:  # decorated under the interpreter before the variable was dropped
        importlib.reload(mod)
    if cuda_device is not None:
        import torch

        torch.cuda.set_device(cuda_device)


def _load(path):
    name = "danlu_precompile_" + os.path.basename(path)[:-3]
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def compile_job(path, kernel, configs, dtypes, sizes, target):
    """-> [(config, error or None, {"seconds", "ptx", "cubin"})] for one kernel."""
    import torch

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
                fn.warmup(*args, grid=(1,), num_warps=warps, **kwargs)
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


def _pool(workers, cuda_device):
    global _POOL, _POOL_KEY
    key = (workers, cuda_device)
    if _POOL is not None and _POOL_KEY == key:
        return _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
    ctx = multiprocessing.get_context("spawn")
    _POOL = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(cuda_device,)
    )
    _POOL_KEY = key
    atexit.register(shutdown)  # stop the workers before the interpreter tears down
    return _POOL


def default_workers() -> int:
    env = os.environ.get("DANLU_COMPILE_THREADS")
    if env:
        return max(1, int(env))
    # compiling is one process per job, so a GPU host's cores are all worth using (half of
    # them left the H200 host's 16 idle while 1000+ configs compiled); a small machine
    # keeps a core for everything else
    cpus = os.cpu_count() or 2
    return max(1, min(32, cpus if cpus >= 8 else cpus // 2))


def precompile(path, jobs, target=None, cuda_device=None, workers=None):
    """``jobs``: [(kernel, [(XBLOCK, RBLOCK, num_warps)], [dtype name per pointer],
    [sizes])]. -> {kernel: [(config, error or None, info)]}. One job per process at a
    time; a single job compiles in this process when it may (GPU target, no interpreter)."""
    if not jobs:
        return {}
    workers = workers or default_workers()
    path = str(path)
    interpreting = os.environ.get("TRITON_INTERPRET", "0") == "1"
    if not interpreting and (workers == 1 or (len(jobs) == 1 and target is None)):
        return {j[0]: compile_job(path, *j, target) for j in jobs}
    pool = _pool(workers, cuda_device)
    with _without_main():  # workers start while jobs are submitted
        futures = {j[0]: pool.submit(compile_job, path, *j, target) for j in jobs}
    return {k: f.result() for k, f in futures.items()}


def shutdown():
    global _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)
        _POOL = None
