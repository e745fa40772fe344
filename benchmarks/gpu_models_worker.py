"""The GPU model suite's worker: builds one model, then for each mode runs the float64
reference, eager, and each compiler's first call (compile time, accuracy), warm-up, interleaved
timing and peak memory, and reports every result as an event (a JSON line on stdout).

Time limits are enforced with SIGALRM (the model's budget and --compile-timeout); anything the
alarm cannot interrupt is the supervisor's job (it kills the worker's process group)."""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import os
import pathlib
import platform
import signal
import statistics
import sys
import time
import traceback
from dataclasses import dataclass

import torch
from gpu_models_zoo import MODELS, ModelSpec
from torch import nn

EVENT = "@@gpu-suite "  # prefix of the worker's machine-readable stdout lines
T0 = float(os.environ.get("GPU_SUITE_T0", time.time()))
SELFCHECK_HOOK = "GPU_SUITE_SELFCHECK_HOOK"  # "crash:<b>", "hang:<b>" or "slow:<b>": tests only


def log(msg: str) -> None:
    stamp = time.strftime("%H:%M:%S", time.gmtime())
    print(f"[{stamp} +{time.time() - T0:6.1f}s] {msg}", flush=True)


class BudgetExceeded(BaseException):
    """Raised by the alarm when a time limit passes. A BaseException, so that library code that
    catches Exception does not swallow it."""

    def __init__(self, which: str):
        super().__init__(which)
        self.which = which  # "model" (the model's budget) or "compile" (--compile-timeout)


class Limits:
    """The worker's deadlines (absolute times): the model's budget and the current first call's
    --compile-timeout, enforced with SIGALRM."""

    def __init__(self, model_deadline: float | None):
        self.model = model_deadline
        self.compile: float | None = None
        self.enabled = hasattr(signal, "setitimer")
        if self.enabled:
            signal.signal(signal.SIGALRM, self._fire)
        self.arm()

    def _fire(self, signum, frame):
        now = time.time()
        if self.model is not None and now >= self.model - 0.05:
            raise BudgetExceeded("model")
        if self.compile is not None and now >= self.compile - 0.05:
            raise BudgetExceeded("compile")
        self.arm()  # early wake-up: wait for the rest

    def arm(self) -> None:
        if not self.enabled:
            return
        due = [d for d in (self.model, self.compile) if d is not None]
        delay = max(0.01, min(due) - time.time()) if due else 0.0
        signal.setitimer(signal.ITIMER_REAL, delay)

    def disarm(self) -> None:
        if self.enabled:
            signal.setitimer(signal.ITIMER_REAL, 0.0)

    @contextlib.contextmanager
    def compile_limit(self, seconds: float | None):
        self.compile = time.time() + seconds if seconds else None
        self.arm()
        try:
            yield
        finally:
            self.compile = None
            self.arm()

    def left(self) -> float | None:
        return None if self.model is None else self.model - time.time()


# ------------------------------------------------------------------------------- the worker


TIMING_LOCK = "GPU_SUITE_TIMING_LOCK"  # a file: one worker at a time measures
WORKERS_DIR = "GPU_SUITE_WORKERS_DIR"  # a file per live worker, named by its process group


@contextlib.contextmanager
def timing_turn(quiet: bool = True):
    """With --jobs, several workers compile at once but only one at a time measures: it takes
    the lock file and, with quiet, stops every other worker's process group (SIGSTOP) until it
    is done, so that neither their compiles (host) nor their first calls and tuning (GPU) run
    beside its timed rounds, and runs all its threads on the same cores as every other
    measurement (measure_cpus). The pauses are logged, and compile times have them taken
    out. Without --jobs, nothing."""
    path = os.environ.get(TIMING_LOCK)
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # SIGALRM's BudgetExceeded interrupts the wait
        paused, t0 = (_pause_others() if quiet else []), time.time()
        pinned = _pin_all_threads() if quiet else None
        try:
            yield
        finally:
            if pinned:
                _restore_affinity(pinned)
            for pg in paused:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pg, signal.SIGCONT)
            if paused:
                with open(os.path.join(os.environ[WORKERS_DIR], "pauses"), "a") as log_:
                    log_.write(f"{t0 - 0.25!r} {time.time()!r}\n")
            fcntl.flock(f, fcntl.LOCK_UN)


MEASURE_CPUS = "GPU_SUITE_MEASURE_CPUS"  # e.g. "0-3": the cores every measurement runs on


def measure_cpus() -> set[int]:
    """The cores a measuring worker runs on: GPU_SUITE_MEASURE_CPUS, else the four lowest of
    those this process may use. The same cores for every worker, so that no worker's
    host-bound timings (eager inference, launch-bound steps) depend on where the scheduler
    happened to place it."""
    allowed = sorted(os.sched_getaffinity(0))
    spec = os.environ.get(MEASURE_CPUS, "")
    wanted: set[int] = set()
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        wanted.update(range(int(lo), int(hi or lo) + 1))
    return (wanted & set(allowed)) or set(allowed[:4])


def _pin_all_threads() -> dict | None:
    """Pin every thread of this process (the autograd engine's and the allocator's too:
    sched_setaffinity acts on one thread) to measure_cpus(); -> {thread: old cores}."""
    try:
        cpus = measure_cpus()
        old = {}
        for tid in map(int, os.listdir("/proc/self/task")):
            with contextlib.suppress(OSError):
                old[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
        return old
    except (OSError, AttributeError, ValueError):  # no /proc, no affinity calls
        return None


def _restore_affinity(old: dict) -> None:
    for tid, cpus in old.items():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def _pause_others() -> list[int]:
    folder = os.environ.get(WORKERS_DIR)
    if not folder:
        return []
    me, paused = os.getpgrp(), []
    for name in os.listdir(folder):
        if not name.isdigit() or int(name) == me:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(name), signal.SIGSTOP)
            paused.append(int(name))
    if paused:
        time.sleep(0.25)  # GPU work they queued before stopping drains
    return paused


def paused_seconds(t0: float, t1: float) -> float:
    """Seconds of [t0, t1] during which other workers were stopped by a measuring worker (this
    worker among them, or not: an upper bound either way, used to correct compile times)."""
    folder = os.environ.get(WORKERS_DIR)
    if not folder:
        return 0.0
    total = 0.0
    with contextlib.suppress(OSError):
        with open(os.path.join(folder, "pauses")) as f:
            for line in f:
                a, b = map(float, line.split())
                total += max(0.0, min(b, t1) - max(a, t0))
    return total


class OthersBusy:
    """How many CPU cores other processes kept busy, on average, from creation to
    ``cores()``: the machine's busy time (/proc/stat) minus this process's own CPU time.
    A host-bound step (eager inference, launch-bound compiled steps) slows down when other
    processes compete for the cores, so a measurement records it. None where /proc/stat
    cannot be read."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self):
        busy = self._busy()
        wall = time.perf_counter() - self.t0
        if busy is None or self.busy0 is None or wall <= 0:
            return None
        return max(0.0, (busy - self.busy0) - (self._own() - self.own0)) / wall


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def describe_error(e: BaseException) -> str:
    """The exception and where it was raised (and the innermost danlu frame, if another)."""
    text = f"{type(e).__name__}: {e}".strip()
    text = " ".join(text.split())[:600]
    frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    where = []
    if frames:
        where.append(frames[-1])
        ours = [f for f in frames if "danlu" in f.filename]
        if ours and ours[-1] is not frames[-1]:
            where.append(ours[-1])
    for f in where:
        short = "/".join(pathlib.Path(f.filename).parts[-3:])
        text += f" (at {short}:{f.lineno} in {f.name})"
    return text


def status_of(e: BaseException) -> str:
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    if isinstance(e, oom) or "out of memory" in str(e).lower():
        return "oom"
    return "error"


class Variant:
    """One copy of the model under one backend, with its step function and its timings."""

    def __init__(self, backend, module, inputs, train, amp):
        self.backend, self.module, self.fn = backend, module, module
        self.inputs, self.train, self.amp = inputs, train, amp
        self.named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.times: list[float] = []
        self.record: dict = {"notes": {}}  # fields for its final record

    def clear_grads(self) -> None:
        for _, p in self.named:
            p.grad = None

    def step(self, keep: bool = False):
        """A training step (forward, loss, backward) or an inference call; with keep, returns
        {name: tensor}: the loss and every gradient, or the outputs."""
        if self.train:
            self.clear_grads()
            with self.amp():
                loss = self.fn(*self.inputs)
            loss.backward()
            if not keep:
                return None
            out = {"loss": loss.detach()}
            out.update({f"grad:{n}": p.grad for n, p in self.named})
            self.clear_grads()
            return out
        with torch.no_grad(), self.amp():
            out = self.fn(*self.inputs)
        if not keep:
            return None
        if isinstance(out, torch.Tensor):
            return {"output": out}
        leaves = torch.utils._pytree.tree_leaves(out)
        return {f"output.{i}": t for i, t in enumerate(leaves)}

    def timed(self, device, keep=False):
        _sync(device)
        start = time.perf_counter()
        out = self.step(keep)
        _sync(device)
        return time.perf_counter() - start, out


def check_accuracy(ref: dict, res: dict, ref64: dict | None, tol: float):
    """The PT2 rule per tensor: allclose(rtol=atol=tol), else RMSE(result, fp64) <=
    3 * RMSE(eager, fp64) + tol / 10; without a float64 reference, cosine similarity >= 0.99.
    Returns ("pass" | "fail" | "unchecked", [descriptions of failures])."""
    try:
        from danlu.testing import same
    except Exception as e:
        return "unchecked", [f"danlu.testing is not importable: {describe_error(e)}"]
    bad = []
    for name in sorted(set(ref) | set(res)):
        a, b = ref.get(name), res.get(name)
        r64 = ref64.get(name) if ref64 else None
        if a is None or b is None:
            if (a is None) != (b is None):
                bad.append(f"{name}: {'missing' if b is None else 'unexpected'} in the result")
            continue
        ok = same(
            a, b, r64, tol=tol / 10, multiplier=3.0, rtol=tol, atol=tol, cos_similarity=r64 is None
        )
        if not ok:
            bad.append(_explain_mismatch(name, a, b, r64))
    return ("pass" if not bad else "fail"), bad


def _explain_mismatch(name, a, b, r64) -> str:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return f"{name}: {a!r} vs {b!r}"
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{name}: eager {tuple(a.shape)} {a.dtype}, result {tuple(b.shape)} {b.dtype}"
    a64, b64 = a.detach().double(), b.detach().double()
    text = f"{name}: max |diff| {(a64 - b64).abs().max().item():.3g}"
    if r64 is not None:
        r = r64.detach().double().to(a64.device)
        rm = lambda x: (x - r).square().mean().sqrt().item()  # noqa: E731
        text += f", rmse vs fp64 {rm(b64):.3g} (eager {rm(a64):.3g})"
    return text


def _compiler_notes(backend: str) -> str | None:
    backend = compiler_of(backend)[0]
    try:
        if backend == "torch":
            from torch._dynamo.utils import counters

            graphs = counters["stats"].get("unique_graphs", 0)
            breaks = sum(counters["graph_break"].values())
            return f"{graphs} graphs, {breaks} graph breaks"
        if backend == "danlu":
            import danlu

            s = danlu.CompileStats.current()
            text = (
                f"{len(s.graphs)} graphs ({sum(g.ops for g in s.graphs)} ops), "
                f"{s.graph_breaks} graph breaks"
            )
            if s.kernel_graphs:
                kernels = sum(k.kernels for k in s.kernel_graphs)
                fallbacks: dict = {}
                for k in s.kernel_graphs:
                    for op, n in k.fallback_ops.items():
                        fallbacks[str(op)] = fallbacks.get(str(op), 0) + n
                text += f", {len(s.kernel_graphs)} ATen graphs, {kernels} generated kernels"
                if not kernels:
                    text += " (the graphs ran as ATen calls)"
                if fallbacks:
                    top = sorted(fallbacks.items(), key=lambda kv: -kv[1])[:6]
                    text += ", ATen fallbacks " + ", ".join(f"{op} x{n}" for op, n in top)
                # reduce-overhead: did each graph replay, or stop (and why)?
                states = []
                for k in s.kernel_graphs:
                    compiled = k._compiled() if k._compiled is not None else None
                    state = (getattr(compiled, "report", None) or {}).get("cudagraphs")
                    if state and state not in states:
                        states.append(state)
                if states:
                    text += ", CUDA graphs: " + "; ".join(states)
            if s.phases:
                text += "; " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(s.phases.items()))
            first = s.first_run_seconds()
            if first is not None:  # outside the phases: kernel loads and autotuning
                text += f"; first runs {first:.1f} s"
            return text
    except Exception as e:
        return f"(could not read compiler stats: {describe_error(e)})"
    return None


def compiler_of(backend: str) -> tuple[str, str | None]:
    """("torch" | "danlu", mode): a backend name is the compiler, with "-ro" for
    mode="reduce-overhead" (CUDA graphs over the compiled call)."""
    base, _, suffix = backend.partition("-")
    return base, ("reduce-overhead" if suffix == "ro" else None)


def _reset_compiler(backend: str) -> None:
    backend = compiler_of(backend)[0]
    if backend == "torch":
        import torch._dynamo

        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    elif backend == "danlu":
        import danlu

        danlu.reset()


def _compile(backend: str, module: nn.Module):
    hook = os.environ.get(SELFCHECK_HOOK, "")
    if hook == f"crash:{backend}":
        os._exit(3)  # a worker that dies, as a crashing kernel would make it
    if hook == f"hang:{backend}":
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])  # deaf to the soft limit
        time.sleep(3600)
    if hook == f"slow:{backend}":
        time.sleep(3600)  # interrupted by --compile-timeout
    _reset_compiler(backend)
    base, mode = compiler_of(backend)
    kw = {"mode": mode} if mode else {}
    if base == "torch":
        return torch.compile(module, **kw)
    if base == "danlu":
        import danlu

        return danlu.compile(module, **kw)
    raise ValueError(f"unknown backend {backend!r}")


@dataclass
class Opts:
    device: str
    small: bool
    iters: int
    warmup: int
    precision: str
    tol_train: float
    tol_infer: float
    compile_timeout: float | None
    fp64: bool


class Emitter:
    def __init__(self, sink):
        self.sink = sink
        self.current = {"mode": None, "backend": None, "phase": None}

    def phase(self, mode, backend, phase):
        self.current = {"mode": mode, "backend": backend, "phase": phase}
        self.sink({"event": "phase", **self.current})

    def record(self, rec):
        self.sink({"event": "record", "record": rec})

    def info(self, **kw):
        self.sink({"event": "info", **kw})


def blank_record(model, mode, backend) -> dict:
    return {
        "model": model,
        "mode": mode,
        "backend": backend,
        "status": None,
        "reason": None,
        "accuracy": None,
        "median_ms": None,
        "times_ms": [],
        "iters": 0,
        "speedup": None,
        "first_call_s": None,
        "compile_s": None,
        "peak_mem_mb": None,
        "step_mem_mb": None,
        "notes": {},
    }


def run_model(spec: ModelSpec, plan, opts: Opts, emit: Emitter, limits: Limits) -> None:
    """Build the model once, then run each (mode, backends) of the plan."""
    device = torch.device(opts.device)
    emit.phase(None, None, "build")
    log(f"{spec.name}: building ({'small' if opts.small else 'full'} size) on {device}")
    try:
        torch.manual_seed(0)
        module, make_inputs, info = spec.build(opts.small)
        module = module.to(device)
        inputs = tuple(t.to(device) for t in make_inputs(torch.Generator().manual_seed(1)))
        info["params_m"] = round(sum(p.numel() for p in module.parameters()) / 1e6, 2)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a record
        if isinstance(e, KeyboardInterrupt):
            raise
        timeout = isinstance(e, BudgetExceeded)
        for mode, backends in plan:
            for b in backends:
                r = blank_record(spec.name, mode, b)
                r["status"] = "timeout" if timeout else status_of(e)
                r["reason"] = "building the model: " + (
                    "time budget ran out" if timeout else describe_error(e)
                )
                emit.record(r)
        return
    emit.info(model=spec.name, model_info=info)
    log(f"{spec.name}: {info['params_m']} M parameters, {info}")
    for i, (mode, backends) in enumerate(plan):
        try:
            run_mode(spec.name, mode, backends, module, inputs, opts, emit, limits)
        except BudgetExceeded:
            for later_mode, later_backends in plan[i + 1 :]:
                for b in later_backends:
                    r = blank_record(spec.name, later_mode, b)
                    r["status"], r["reason"] = "skipped", "the model's time budget ran out"
                    emit.record(r)
            return
        finally:
            _free(device)


def run_mode(model, mode, backends, base, inputs, opts: Opts, emit: Emitter, limits: Limits):
    device = torch.device(opts.device)
    train = mode == "train"
    tol = opts.tol_train if train else opts.tol_infer
    if opts.precision == "bf16":
        amp = lambda: torch.autocast(device.type, dtype=torch.bfloat16)  # noqa: E731
    else:
        amp = contextlib.nullcontext
    order = ["eager"] + [b for b in backends if b != "eager"]
    pending = {b: blank_record(model, mode, b) for b in order}

    def final(b, **kw):
        rec = pending.pop(b)
        rec.update(kw)
        emit.record(rec)
        log(
            f"{model} {mode} {b}: {rec['status']}"
            + (f" ({rec['reason'][:300]})" if rec.get("reason") else "")
            + (f" median {rec['median_ms']:.2f} ms" if rec.get("median_ms") else "")
            + (f" speedup {rec['speedup']:.2f}x" if rec.get("speedup") else "")
            + (f" compile {rec['compile_s']:.1f} s" if rec.get("compile_s") is not None else "")
            + (f" accuracy {rec['accuracy']}" if rec.get("accuracy") else "")
        )

    variants: dict[str, Variant] = {}
    try:
        ref64, ref64_note = None, None
        if opts.fp64:
            emit.phase(mode, None, "fp64")
            log(f"{model} {mode}: float64 reference")
            try:
                m64 = copy.deepcopy(base).double().train(train)
                in64 = tuple(t.double() if t.is_floating_point() else t for t in inputs)
                with timing_turn(quiet=False):  # a float64 step fills the GPU: not beside a timing
                    ref64 = Variant("fp64", m64, in64, train, contextlib.nullcontext).step(
                        keep=True
                    )
                    _sync(device)
            except Exception as e:
                ref64_note = f"no float64 reference ({describe_error(e)[:200]}); cosine rule"
                log(f"{model} {mode}: {ref64_note}")
            m64 = in64 = None
            _free(device)
        else:
            ref64_note = "float64 reference off (--no-fp64); cosine rule"

        emit.phase(mode, "eager", "first call")
        try:
            ev = Variant("eager", copy.deepcopy(base).train(train), inputs, train, amp)
            first, ref = ev.timed(device, keep=True)
            eager_call = min(ev.timed(device)[0], ev.timed(device)[0])  # compile-time baseline
        except Exception as e:
            reason = f"eager reference failed: {describe_error(e)}"
            for b in list(pending):
                final(b, status=status_of(e), reason=reason)
            return
        ev.record.update(first_call_s=first, accuracy="reference")
        variants["eager"] = ev
        log(f"{model} {mode} eager: first call {first:.2f} s, second {eager_call * 1e3:.1f} ms")

        for b in order[1:]:
            emit.phase(mode, b, "compile")
            log(f"{model} {mode} {b}: compiling (first call)")
            v, failure = _compile_and_check(
                b, base, inputs, train, amp, ref, ref64, tol, opts, limits, eager_call, len(order)
            )
            if failure:
                final(b, **failure)
                _free(device)
                continue
            if ref64_note:
                v.record["notes"]["accuracy_rule"] = ref64_note
            variants[b] = v
            log(
                f"{model} {mode} {b}: first call {v.record['first_call_s']:.1f} s, "
                f"accuracy {v.record['accuracy']}"
            )

        ref = ref64 = None  # free the references before warm-up and memory measurement
        _free(device)
        with timing_turn():
            _measure(model, mode, variants, opts, emit, limits, final, device)
    except BudgetExceeded:
        where = emit.current
        for b in list(pending):
            if b == where["backend"] and where["phase"] == "compile":
                final(
                    b, status="timeout", reason="the model's time budget ran out in its first call"
                )
            else:
                final(
                    b,
                    status="skipped",
                    reason=f"the model's time budget ran out during {where['phase']}"
                    + (f" of {where['backend']}" if where["backend"] else ""),
                )
        raise
    finally:
        variants.clear()
        for b in order[1:]:
            with contextlib.suppress(Exception):
                _reset_compiler(b)


def _measure(model, mode, variants, opts: Opts, emit: Emitter, limits: Limits, final, device):
    """Warm-up, interleaved timed rounds and one step's peak memory of every variant."""
    for _ in range(opts.warmup):
        for b, v in list(variants.items()):
            emit.phase(mode, b, "warmup")  # a worker that dies here is blamed on b
            try:
                v.step()
                _sync(device)  # an asynchronous CUDA error surfaces here, under b
            except Exception as e:
                _drop(b, variants, final, e, "warm-up")
                if b == "eager":
                    return
    log(f"{model} {mode}: timing {opts.iters} interleaved rounds of {list(variants)}")
    last_round, truncated = 0.0, False
    busy = OthersBusy()
    for i in range(opts.iters):
        left = limits.left()
        if i and left is not None and left < 3 * last_round + 10:
            truncated = True
            break
        start = time.perf_counter()
        for b, v in list(variants.items()):
            emit.phase(mode, b, "timing")
            try:
                v.times.append(v.timed(device)[0])
            except Exception as e:
                _drop(b, variants, final, e, "timing")
                if b == "eager":
                    return
        last_round = time.perf_counter() - start
    others = busy.cores()
    if device.type == "cuda":
        for b, v in variants.items():
            emit.phase(mode, b, "memory")
            try:
                v.clear_grads()
                _sync(device)
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                v.step()
                _sync(device)
                peak = torch.cuda.max_memory_allocated()
                v.record.update(peak_mem_mb=peak / 2**20, step_mem_mb=(peak - before) / 2**20)
                v.clear_grads()
            except Exception as e:
                v.record["notes"]["memory"] = f"not measured: {describe_error(e)[:200]}"
    eager_med = statistics.median(variants["eager"].times)
    for b, v in variants.items():
        med = statistics.median(v.times)
        if truncated:
            v.record["notes"]["timing"] = f"only {len(v.times)} rounds: time budget"
        if others is not None:
            v.record["others_cpu_cores"] = round(others, 2)
        final(
            b,
            status="ok",
            median_ms=med * 1e3,
            times_ms=[round(t * 1e3, 4) for t in v.times],
            iters=len(v.times),
            speedup=eager_med / med,
            eager_median_ms=eager_med * 1e3,  # the reference this speedup is against
            **{k: v.record[k] for k in v.record if k not in ("status",)},
        )


def _drop(b, variants, final, e, phase):
    variants.pop(b, None)
    final(b, status=status_of(e), reason=f"during {phase}: {describe_error(e)}")
    if b == "eager":
        for other in list(variants):
            variants.pop(other)
            final(other, status="error", reason="eager failed, nothing to compare against")


def _first_call_limit(opts, limits, eager_call, n_variants):
    """Seconds this first call may take: --compile-timeout, and never so much of the model's
    budget that the backends already compiled could not be timed (a slow compiler must not
    cost the others their results). Returns (seconds or None, reason to skip or None)."""
    left = limits.left()
    if left is None:
        return opts.compile_timeout, None
    # warm-up, timing and memory for every variant, at up to twice eager's step time, + slack
    reserve = 15 + (opts.warmup + opts.iters + 2) * eager_call * n_variants * 2
    avail = left - reserve
    if avail < 5:
        return None, f"not compiled: {left:.0f} s left of the model's budget, {reserve:.0f} s kept"
    return (min(opts.compile_timeout, avail) if opts.compile_timeout else avail), None


def _compile_and_check(
    b, base, inputs, train, amp, ref, ref64, tol, opts, limits, eager_call, n_variants
):
    """Compile a fresh copy, time its first call, check it; returns (variant, None) or
    (None, fields of a failure record). Its own frame, so a failure frees the copy."""
    limit, skip = _first_call_limit(opts, limits, eager_call, n_variants)
    if skip:
        return None, {"status": "skipped", "reason": skip}
    try:
        with limits.compile_limit(limit):
            module = copy.deepcopy(base).train(train)
            v = Variant(b, module, inputs, train, amp)
            v.fn = _compile(b, module)
            t0 = time.time()
            first, out = v.timed(torch.device(opts.device), keep=True)
            paused = paused_seconds(t0, time.time())  # stopped while another worker measured
            first -= paused
    except BudgetExceeded as e:
        if e.which != "compile":
            raise
        return None, {
            "status": "timeout",
            "reason": f"first call (compile) ran past {limit:.0f} s (--compile-timeout "
            f"{opts.compile_timeout}, or the model's budget less the time kept for timing)",
            "notes": {"compiler": _compiler_notes(b)},
        }
    except Exception as e:
        return None, {
            "status": status_of(e),
            "reason": describe_error(e),
            "notes": {"compiler": _compiler_notes(b)},
        }
    acc, failures = check_accuracy(ref, out, ref64, tol)
    notes = {"compiler": _compiler_notes(b)}
    if paused:
        notes["paused_s"] = round(paused, 1)
    if failures:
        notes["accuracy_failures"] = failures[:5] + (
            [f"... {len(failures) - 5} more"] if len(failures) > 5 else []
        )
    v.record.update(
        first_call_s=first, compile_s=max(0.0, first - eager_call), accuracy=acc, notes=notes
    )
    return v, None


def worker_main(args) -> None:
    opts = opts_from_args(args)
    if opts.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True  # as torch.compile's dashboard
        torch.backends.cudnn.allow_tf32 = True
    emit = Emitter(lambda ev: print(EVENT + json.dumps(ev, default=str), flush=True))
    emit.info(environment=device_meta(opts.device))
    limits = Limits(args.worker_deadline)
    try:
        run_model(MODELS[args.worker], json.loads(args.plan), opts, emit, limits)
    finally:
        limits.disarm()
        sys.stdout.flush()
    os._exit(0)  # don't wait for compile worker pools at interpreter exit


def opts_from_args(args) -> Opts:
    return Opts(
        device=args.device,
        small=args.small,
        iters=args.iters,
        warmup=args.warmup,
        precision=args.precision,
        tol_train=args.tol_train,
        tol_infer=args.tol_infer,
        compile_timeout=args.compile_timeout,
        fp64=not args.no_fp64,
    )


def device_meta(device: str) -> dict:
    meta = {"device": device}
    if device.startswith("cuda") and torch.cuda.is_available():
        meta["device_name"] = torch.cuda.get_device_name()
        meta["cuda"] = torch.version.cuda
    else:
        meta["device_name"] = f"CPU ({platform.processor() or platform.machine()}, "
        meta["device_name"] += f"{torch.get_num_threads()} threads)"
    return meta
