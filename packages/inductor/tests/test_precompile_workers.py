"""The parallel Triton compile workers start without the user's main module: a script with
no ``if __name__ == "__main__":`` guard is run once, not again in every worker (spawned
workers used to import it, re-running the model and failing with multiprocessing's
"bootstrapping phase" error, so every kernel compiled serially on its first launch)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from child_runs import TRITON_ON_CPU_ENV

from danlu_inductor.codegen.triton import precompile

HERE = pathlib.Path(__file__).parent

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import torch
from helpers import aten_graph
from danlu_inductor import compile_fx
from danlu_inductor.codegen.triton import precompile

print("top-level code ran", flush=True)

def fn(x, y):
    a = (x.sin() + y).relu()
    return a.sum(1), (x * y).cos().amax(0), torch.softmax(a, -1)

inputs = [torch.randn(33, 70), torch.randn(33, 70)]
compiled = compile_fx(aten_graph(fn, *inputs), inputs)
got, want = compiled(*inputs), fn(*inputs)
assert all(torch.allclose(g, w, atol=1e-5) for g, w in zip(got, want))
assert precompile._POOL is not None, "the kernels were not compiled in worker processes"
print("kernels", compiled.num_kernels, flush=True)
"""


def test_unguarded_script_runs_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tests=str(HERE)))
    env = {**os.environ, **TRITON_ON_CPU_ENV, "DANLU_CACHE_DIR": str(tmp_path / "cache")}
    env["TRITON_DEFAULT_FP_FUSION"] = "0"
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("top-level code ran") == 1, proc.stdout + proc.stderr[-2000:]
    assert "parallel Triton compile failed" not in proc.stderr, proc.stderr[-2000:]
    assert "bootstrapping" not in proc.stderr
    assert "kernels" in proc.stdout


KERNELS = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, XBLOCK: tl.constexpr):
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


@triton.jit
def row_sum(x_ptr, y_ptr, n, r, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    rows = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    cols = tl.arange(0, RBLOCK)[None, :]
    v = tl.load(x_ptr + rows * r + cols, mask=(rows < n) & (cols < r), other=0.0)
    tl.store(y_ptr + rows, tl.sum(v, 1)[:, None], mask=rows < n)
"""


def test_each_config_is_a_job_and_results_keep_config_order(tmp_path):
    # sm_90 builds in two worker processes (no GPU needed): every config of every kernel
    # comes back under its kernel, in the order given, and the stats count them
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    sig_scale = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    sig_sum = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "r": "i32"}
    env_module = _with_meta(path, {"scale": sig_scale, "row_sum": sig_sum})
    jobs = [
        ("scale", [(256, None, 2), (1024, None, 4)], ["float32"] * 2, [1000]),
        ("row_sum", [(1, 64, 2), (8, 64, 4), (2, 64, 2)], ["float32"] * 2, [100, 64]),
    ]
    stats = {}
    out = precompile.precompile(
        env_module, jobs, target=("cuda", 90, 32), workers=2, slow_first=["row_sum"], stats=stats
    )
    assert [c for c, _, _ in out["scale"]] == [(256, None, 2), (1024, None, 4)]
    assert [c for c, _, _ in out["row_sum"]] == [(1, 64, 2), (8, 64, 4), (2, 64, 2)]
    assert all(err is None for rows in out.values() for _, err, _ in rows), out
    assert all(info["cubin"] > 0 for rows in out.values() for _, _, info in rows)
    assert stats["jobs"] == 2 and stats["configs"] == 5 and stats["workers"] == 2
    assert 0 < stats["build_s_max"] <= stats["build_s_sum"]


def test_workers_build_into_the_parents_triton_cache(tmp_path, monkeypatch):
    """Workers started before the parent chose its Triton cache folder (``cache_root`` sets
    TRITON_CACHE_DIR on the first kernel module) still write the binaries there: each job
    carries the folder. They wrote to Triton's default folder before, and every config was
    compiled again by the parent at its first launch."""
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    path = _with_meta(path, {"scale": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}})
    precompile.shutdown()
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # Triton's default folder, isolated
    try:
        pool = precompile._pool(2, None)
        with precompile.without_main():  # the workers start now, without the variable
            started = [pool.submit(precompile._ready) for _ in range(2)]
        assert all(f.result(timeout=300) for f in started)
        chosen = tmp_path / "chosen"
        monkeypatch.setenv("TRITON_CACHE_DIR", str(chosen))
        jobs = [("scale", [(256, None, 2), (512, None, 4)], ["float32"] * 2, [1000])]
        out = precompile.precompile(path, jobs, target=("cuda", 90, 32), workers=2)
        assert all(err is None for _, err, _ in out["scale"]), out
        built = [p.name for p in chosen.rglob("*.cubin")]
        assert len(built) == 2, sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
        assert not list((tmp_path / "home").rglob("*.cubin"))
    finally:
        precompile.shutdown()


def test_warm_up_chooses_the_cache_folder_first(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    precompile.shutdown()
    try:
        precompile.warm_up(workers=2)
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "inductor" / "triton" / "bin")
    finally:
        precompile.shutdown()


def test_start_build_workers_only_for_cuda_graphs(monkeypatch):
    """``start_build_workers`` (called by the umbrella backend before its autograd phase)
    starts the pool for a graph on a CUDA device, on that device, and for nothing else:
    CPU graphs, graphs on several devices, the interpreter."""
    import torch

    from danlu_inductor import start_build_workers

    started = []
    monkeypatch.setattr(precompile, "warm_up", lambda cuda_device=None: started.append(cuda_device))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    cpu = [torch.randn(2, 3), 4]
    assert start_build_workers(cpu) is False and started == []

    class OnGpu1:  # a tensor stand-in on a machine without a GPU: only its device is read
        device = torch.device("cuda", 1)

    gpu = [OnGpu1()]
    monkeypatch.setattr(
        "danlu_inductor.pipeline.triton._device_of", lambda inputs: inputs[0].device
    )
    assert start_build_workers(gpu) is True and started == [1]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert start_build_workers(gpu) is False and started == [1]

    def several(inputs):
        raise ValueError("inputs on several devices")

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr("danlu_inductor.pipeline.triton._device_of", several)
    assert start_build_workers(gpu) is False and started == [1]


def _with_meta(path, signatures):
    """The kernel file with the ``danlu_meta`` the workers read (as generated kernels have)."""
    text = path.read_text()
    for name, sig in signatures.items():
        text += f"\n{name}.danlu_meta = {{'signature': {sig!r}}}\n"
    path.write_text(text)
    return path


class _Kernel:
    def __init__(self, name):
        self.src, self.metadata = f"src:{name}", f"meta:{name}"


def test_launcher_is_built_beside_the_cubin():
    # Triton 3.4-3.6 build a host launcher per kernel at its first launch; the worker builds it
    # through the driver's launcher class (what the first launch calls, then found cached)
    built = []

    class Driver:
        def launcher_cls(self, src, metadata):
            built.append((src, metadata))

    info = {}
    precompile.prebuild_launcher(_Kernel("k"), info, driver=Driver())
    assert built == [("src:k", "meta:k")]
    assert info["launcher_s"] >= 0 and "launcher_error" not in info


def test_a_launcher_that_cannot_build_is_noted_not_raised():
    class Driver:
        def launcher_cls(self, src, metadata):
            raise RuntimeError("no C compiler")

    info = {}
    precompile.prebuild_launcher(_Kernel("k"), info, driver=Driver())
    assert "no C compiler" in info["launcher_error"] and "launcher_s" not in info
    # nothing to build: a driver without launcher classes, or no compiled kernel
    info = {}
    precompile.prebuild_launcher(_Kernel("k"), info, driver=object())
    precompile.prebuild_launcher(None, info, driver=Driver())
    assert info == {}


def test_jobs_carry_the_parents_triton_variables(monkeypatch):
    """A worker's environment is the fork server's, from when that started: each job carries
    the parent's Triton variables at submission (cache folder, compile options), so a variable
    set or dropped since then reaches the worker, and the interpreter switch never does."""
    monkeypatch.setenv("TRITON_DANLU_PROBE_OLD", "1")
    precompile.shutdown()
    try:
        pool = precompile._pool(1, None)
        with precompile.without_main():
            assert pool.submit(precompile._ready).result(timeout=300)
        monkeypatch.delenv("TRITON_DANLU_PROBE_OLD")
        monkeypatch.setenv("TRITON_DANLU_PROBE_NEW", "2")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        env = precompile.triton_env()
        assert "TRITON_INTERPRET" not in env and env["TRITON_DANLU_PROBE_NEW"] == "2"
        pool.submit(precompile._use_env, env).result(timeout=60)
        seen = [pool.submit(os.getenv, k).result(timeout=60) for k in sorted(env)]
        assert seen == [env[k] for k in sorted(env)]
        assert pool.submit(os.getenv, "TRITON_DANLU_PROBE_OLD").result(timeout=60) is None
        assert pool.submit(os.getenv, "TRITON_INTERPRET").result(timeout=60) is None
    finally:
        precompile.shutdown()


def test_a_dead_helper_fails_its_jobs_and_is_replaced():
    """The build workers fork from one helper process: if it dies, the jobs waiting on it
    fail (the compile then builds each kernel at its first launch) and the next pool asked
    for is a new one that works."""
    import signal
    import time
    from concurrent.futures.process import BrokenProcessPool

    import pytest

    precompile.shutdown()
    try:
        pool = precompile._pool(2, None)
        assert pool.submit(precompile._ready).result(timeout=300)
        waiting = pool.submit(time.sleep, 30)
        os.kill(pool._proc.pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            waiting.result(timeout=60)
        pool._proc.join(timeout=30)
        fresh = precompile._pool(2, None)
        assert fresh is not pool
        assert fresh.submit(precompile._ready).result(timeout=300)
    finally:
        precompile.shutdown()


def test_workers_see_only_the_callers_device_without_a_context(monkeypatch):
    """A pool for CUDA device ``i`` makes the caller's ``i``-th visible device the workers'
    only one (their device 0, what Triton builds for), through CUDA_VISIBLE_DEVICES and
    without opening a CUDA context in any worker (each one held 0.5 GiB of device memory)."""
    import pytest

    assert precompile.only_device(2, None) == "2"
    assert precompile.only_device(1, "3, 5") == "5"
    assert precompile.only_device(0, "GPU-aa,GPU-bb") == "GPU-aa"
    for index, visible in ((2, "3,5"), (-1, "3"), (0, "")):
        with pytest.raises(ValueError, match="not among CUDA_VISIBLE_DEVICES"):
            precompile.only_device(index, visible)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    precompile.shutdown()
    try:
        pool = precompile._pool(1, 1)
        with precompile.without_main():
            assert pool.submit(os.getenv, "CUDA_VISIBLE_DEVICES").result(timeout=300) == "5"
        assert pool.submit(_cuda_initialized).result(timeout=60) is False
    finally:
        precompile.shutdown()


def _cuda_initialized():
    import torch

    return torch.cuda.is_initialized()


def test_compile_only_driver_is_harmless_without_a_gpu():
    """The worker's stream stub (a build must not open a CUDA context) changes nothing where
    Triton has no GPU driver, and where it has one, a build's stream is the default one."""
    precompile._compile_only_driver()
    assert precompile._default_stream(0) == 0
