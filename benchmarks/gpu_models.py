"""GPU model suite: eager, torch.compile and danlu.compile side by side on real models.

For each model and mode (training step or inference), in bf16 autocast on CUDA:

- compile time: wall time of the first call minus one eager call;
- accuracy against eager by the PT2 rule (`danlu.testing.same` with a float64 reference,
  tolerance 1e-2 for training and 1e-3 for inference, multiplier 3); for training, the loss and
  every parameter gradient of one step are compared;
- speed: median of interleaved timed calls after warm-up (one call of each backend per round,
  `torch.cuda.synchronize()` before and after each call, host clock); speedup = eager / backend;
- peak memory of one step (`torch.cuda.max_memory_allocated`, reset before each step).

The training step is forward, loss, backward, with the loss inside the compiled module; the
optimizer step is not included (as on torch.compile's dashboard). Dropout is configured to 0, so
eager, compiled and float64 runs compute the same function.

Each compiler of each model runs in a worker process of its own, timed interleaved with an
eager copy in the same worker (--together: all three in one worker), so a crash (a kernel that
poisons the CUDA context, a segfault) or a hang costs that worker only, and a backend whose
worker died is recorded as crashed and the rest rerun without it. Inside a worker every
(mode, backend) runs in try/except and a failure is recorded with its reason. results.json,
table.md and speedups.png are rewritten in --out after every record.

    python benchmarks/gpu_models.py --models gpt2,bert --modes train,infer --out DIR
    python benchmarks/gpu_models.py --small --device cpu --iters 5 --out /tmp/smoke
    python benchmarks/gpu_models.py --merge DIR1 DIR2 --out DIR
    python benchmarks/gpu_models.py --selfcheck        # --selfcheck-full: with workers
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import pathlib
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gpu_models_report as report  # noqa: E402
from gpu_models_worker import (  # noqa: E402
    EVENT,
    SELFCHECK_HOOK,
    T0,
    TIMING_LOCK,
    WORKERS_DIR,
    BudgetExceeded,
    Emitter,
    Limits,
    blank_record,
    check_accuracy,
    device_meta,
    log,
    opts_from_args,
    run_model,
    worker_main,
)
from gpu_models_zoo import GROUPS, MODELS, SPECS, missing_dependency  # noqa: E402

BACKENDS = tuple(report.BACKENDS)
MODES = ("train", "infer")
CACHE_VARS = ("DANLU_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
DOC_LOCK = threading.RLock()  # the results document, shared by the supervisors of --jobs
STOP = threading.Event()  # set on interrupt: every supervisor kills its worker


# --------------------------------------------------------------------------- the supervisor


@dataclass
class WorkerOutcome:
    rc: int | None
    killed: bool
    last: dict = field(default_factory=dict)
    tail: list = field(default_factory=list)


def run_worker(name, plan, deadline, args, on_event) -> WorkerOutcome:
    """Run one model in a child process (its own process group), passing its events on; kill
    it (and the compile workers it started) once the hard deadline passes."""
    cmd = [sys.executable, "-u", str(pathlib.Path(__file__).resolve()), "--worker", name]
    cmd += ["--plan", json.dumps(plan), "--worker-deadline", repr(deadline)]
    cmd += ["--device", args.device, "--iters", str(args.iters), "--warmup", str(args.warmup)]
    cmd += ["--precision", args.precision, "--tol-train", str(args.tol_train)]
    cmd += ["--tol-infer", str(args.tol_infer)]
    if args.compile_timeout:
        cmd += ["--compile-timeout", str(args.compile_timeout)]
    if args.small:
        cmd.append("--small")
    if args.no_fp64:
        cmd.append("--no-fp64")
    env = dict(os.environ, PYTHONUNBUFFERED="1", GPU_SUITE_T0=repr(T0))
    # each worker's compiles start from caches of their own: the reduce-overhead worker of a
    # model must not find the graphs the default-mode worker just compiled (cold compile times)
    tag = name + "-" + "-".join(b for b in plan[0][1] if b != "eager")
    for var in CACHE_VARS:
        if env.get(var):
            env[var] = os.path.join(env[var], tag)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
        start_new_session=False,
        process_group=0,
    )
    registry = os.environ.get(WORKERS_DIR)
    if registry:  # --jobs: a measuring worker finds this one here, to stop it meanwhile
        pathlib.Path(registry, str(proc.pid)).touch()
    lines: queue.Queue = queue.Queue()

    def read():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    out = WorkerOutcome(rc=None, killed=False)
    tail: deque = deque(maxlen=40)
    hard = deadline + args.grace
    eof, exited_at = False, None
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if line is None:
                eof = True
            elif line.startswith(EVENT):
                try:
                    ev = json.loads(line[len(EVENT) :])
                except json.JSONDecodeError:
                    tail.append(line.rstrip())
                    continue
                if ev.get("event") == "phase":
                    out.last = ev
                on_event(ev)
            elif line:
                print(line, end="", flush=True)
                tail.append(line.rstrip())
            if proc.poll() is not None:
                if eof and lines.empty():
                    break
                exited_at = exited_at or time.time()
                if time.time() - exited_at > 5 and lines.empty():
                    break  # compile workers left behind still hold the pipe
            elif STOP.is_set():
                out.killed = True
                _kill_group(proc)
            elif time.time() > hard:
                log(f"{name}: worker still running {args.grace:.0f} s past its deadline; killing")
                out.killed = True
                _kill_group(proc)
    finally:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            proc.wait(timeout=10)
        if registry:
            with contextlib.suppress(OSError):
                pathlib.Path(registry, str(proc.pid)).unlink()
            _resume_if_nobody_measures()
    out.rc = proc.returncode
    out.tail = list(tail)
    return out


def _kill_group(proc) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def supervise_model(spec, plan, deadline, args, doc, save) -> None:
    """Run a model's plan in workers until every (mode, backend) has a record: a worker that
    dies while running a compiler is blamed on that compiler, which is recorded as crashed,
    and the rest is run again without it."""
    name = spec.name
    received: set = set()

    def put(rec):
        with DOC_LOCK:
            _put(rec)

    def _put(rec):
        old = next((r for r in doc["records"] if report.key(r) == report.key(rec)), None)
        if rec["backend"] == "eager" and old and old["status"] == "ok" and rec["status"] != "ok":
            return  # another worker's eager reference stands; the compiled record says why
        report.put(doc, rec)

    def on_event(ev):
        with DOC_LOCK:
            _on_event(ev)

    def _on_event(ev):
        if ev["event"] == "record":
            rec = ev["record"]
            received.add((rec["mode"], rec["backend"]))
            put(rec)
            save()
        elif ev["event"] == "info" and "model_info" in ev:
            doc["models"][name] = ev["model_info"]
        elif ev["event"] == "info" and "environment" in ev:
            doc["runs"][-1].update(ev["environment"])

    def fail(mode, b, status, reason):
        r = blank_record(name, mode, b)
        r["status"], r["reason"] = status, reason
        put(r)

    def eager_ok(mode):
        return any(
            report.key(r) == (name, mode, "eager") and r["status"] == "ok" for r in doc["records"]
        )

    for attempt in range(1, 4):
        log(f"{name}: worker {attempt}, plan {plan}, {deadline - time.time():.0f} s left")
        outcome = run_worker(name, plan, deadline, args, on_event)
        missing = [(m, b) for m, bs in plan for b in bs if (m, b) not in received]
        if not missing:
            return
        last = outcome.last or {}
        mode, backend, phase = last.get("mode"), last.get("backend"), last.get("phase")
        tail = " | ".join(t for t in outcome.tail[-6:] if t.strip())[-700:]
        if outcome.killed:
            for m, b in missing:
                if STOP.is_set():
                    fail(m, b, "skipped", f"interrupted (the run was stopped in {phase})")
                elif (m, b) == (mode, backend) and phase == "compile":
                    fail(m, b, "timeout", "killed: its first call ran past the model's budget")
                else:
                    fail(m, b, "skipped", f"worker killed at the model's deadline (in {phase})")
            save()
            return
        how = f"worker exited with {outcome.rc} during {phase}"
        how += f" of {backend}" if backend else ""
        how += f" ({mode})" if mode else ""
        how += f"; last output: {tail}" if tail else ""
        if outcome.rc == 0:
            how = "worker ended without a result; " + how
        # the worker says which backend it is running: a death there is that backend's
        blamed = (mode, backend) if backend not in (None, "eager") else None
        new_plan = []
        for m, bs in plan:
            left = [b for b in bs if (m, b) in missing]
            if not left:
                continue
            if mode is None or (m == mode and blamed is None):
                for b in left:
                    fail(m, b, "crash", how)
                continue
            if blamed and m == blamed[0]:
                fail(m, blamed[1], "crash", how)
                left = [b for b in left if b != blamed[1]]
            if left == ["eager"] and eager_ok(m):
                continue  # another worker measured eager already
            if left:
                new_plan.append((m, left))
        save()
        if not new_plan:
            return
        if deadline - time.time() < 30:
            for m, bs in new_plan:
                for b in bs:
                    fail(m, b, "skipped", f"no time left to rerun after: {how}")
            save()
            return
        plan = new_plan
    for m, bs in plan:
        for b in bs:
            if (m, b) not in received:
                fail(m, b, "crash", "worker failed three times")
    save()


def worker_groups(backends: list[str], together: bool) -> list[list[str]]:
    """The backends each worker runs: every compiler in a worker of its own next to eager (no
    compiler can disturb another: frame hooks, global state, a crash, a retry on warm caches),
    or all in one worker with --together."""
    compilers = [b for b in backends if b != "eager"]
    if together or not compilers:
        return [["eager", *compilers]]
    return [["eager", b] for b in compilers]


def run_meta(args) -> dict:
    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    commit = None
    with contextlib.suppress(Exception):
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=pathlib.Path(__file__).parent,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
    return {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(T0)),
        "command": "python benchmarks/gpu_models.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "torch": torch.__version__,
        "triton": version("triton"),
        "transformers": version("transformers"),
        "timm": version("timm"),
        "danlu": version("danlu"),
        "commit": commit,
        "python": platform.python_version(),
        "precision": args.precision,
        "precision_label": "bf16 autocast" if args.precision == "bf16" else "float32",
        "iters": args.iters,
        "warmup": args.warmup,
        "tol_train": args.tol_train,
        "tol_infer": args.tol_infer,
        "small": args.small,
        "time_budget_s": args.time_budget,
        "compile_timeout_s": args.compile_timeout,
    }


def orchestrate(args, names, modes, backends) -> dict:
    out = pathlib.Path(args.out)
    doc = report.new_doc(run_meta(args))
    doc["model_order"] = list(names)
    deadline = T0 + args.deadline if args.deadline else None
    jobs = 1 if args.inprocess else max(1, args.jobs)

    def save(plot=False):
        with DOC_LOCK:
            report.write(doc, out, with_plot=plot)

    def skip_all(name, reason):
        for group in groups:
            skip_group(name, group, reason, eager=True)

    def skip_group(name, group, reason, eager=False):
        with DOC_LOCK:
            for m in modes_of(group):
                for b in group if eager else group[1:]:
                    r = blank_record(name, m, b)
                    r["status"], r["reason"] = "skipped", reason
                    report.put(doc, r)

    def modes_of(group) -> list[str]:
        # reduce-overhead (CUDA graphs) is measured in the modes of --ro-modes only
        if any(b.endswith("-ro") for b in group):
            return [m for m in modes if m in ro_modes]
        return modes

    def may_start(name) -> bool:
        missing = missing_dependency(MODELS[name])
        if missing:
            log(f"{name}: skipped: {missing}")
            skip_all(name, missing)
            save()
            return False
        left = None if deadline is None else deadline - time.time()
        if STOP.is_set() or (left is not None and left < args.min_model_time):
            reason = "interrupted (the run was stopped)"
            if not STOP.is_set():
                reason = f"not started: {left:.0f} s left of --deadline {args.deadline} s"
            skip_all(name, reason)
            log(f"{name}: {reason}")
            return False
        return True

    def run_group(name, group, group_deadline) -> None:
        plan = [(m, group) for m in modes_of(group)]
        if not plan:
            return
        if deadline is not None:
            group_deadline = min(group_deadline, deadline)
        if group_deadline - time.time() < 20 or STOP.is_set():
            skip_group(name, group, "not started: the time budget was used by earlier workers")
        elif args.inprocess:
            run_inprocess(MODELS[name], plan, group_deadline, args, doc, save)
        else:
            supervise_model(MODELS[name], plan, group_deadline, args, doc, save)

    def run_one(name) -> None:
        """Every worker of one model in turn, within --time-budget for the model."""
        if not may_start(name):
            return
        model_deadline = time.time() + args.time_budget
        for g, group in enumerate(groups):
            # later workers of this model are each left at least --min-worker-time
            run_group(name, group, model_deadline - (len(groups) - 1 - g) * args.min_worker_time)
        save(plot=True)

    def run_unit(name, group) -> None:
        """With --jobs: one worker, within --time-budget of its own."""
        if may_start(name):
            run_group(name, group, time.time() + args.time_budget)
            save(plot=True)

    groups = worker_groups(backends, args.together or args.inprocess)
    ro_modes = [m for m in modes if m in args.ro_modes.split(",")]
    save()
    if jobs > 1:
        _share_the_machine(out)
    try:
        if jobs == 1:
            for name in names:
                run_one(name)
        else:
            # workers (model x compiler) compile side by side; timing_turn() in the workers
            # keeps their timed rounds one at a time, on a core of their own
            with ThreadPoolExecutor(jobs) as pool:
                # reduce-overhead workers last: if time runs short, those are what is missed
                order = sorted(
                    ((n, g) for n in names for g in groups),
                    key=lambda u: any(b.endswith("-ro") for b in u[1]),
                )
                units = [pool.submit(run_unit, n, g) for n, g in order]
                for f in as_completed(units):
                    f.result()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second signal must not cut the save
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        STOP.set()  # supervisors kill their workers within half a second
        log("interrupted: writing what was measured")
        time.sleep(1.0)
        for name in names:
            skip_all(name, "interrupted (the run was stopped)")  # never replaces a result
        save()  # no plot: be quick, the caller may kill us soon
        raise
    save(plot=True)
    return doc


def _share_the_machine(out: pathlib.Path) -> None:
    """--jobs: the workers' environment for timing_turn(): a lock file, and a folder where
    each live worker has a file named by its process group (a measuring worker stops the
    others). An existing lock is kept: two suites started side by side measure one at a
    time too."""
    folder = out.resolve() / ".workers"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(TIMING_LOCK, str(out.resolve() / ".timing.lock"))
    os.environ.setdefault(WORKERS_DIR, str(folder))
    log("--jobs: workers compile side by side; each measures alone, the others stopped")


def _resume_if_nobody_measures() -> None:
    """After a worker ended: if it died while measuring, the others are still stopped. The
    lock is free then (a dead process holds no lock), and nobody else is measuring."""
    lock, folder = os.environ.get(TIMING_LOCK), os.environ.get(WORKERS_DIR)
    if not lock or not folder:
        return
    import fcntl

    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # someone measures, and resumes the others when done
        try:
            for name in os.listdir(folder):
                if name.isdigit():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(name), signal.SIGCONT)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_inprocess(spec, plan, deadline, args, doc, save) -> None:
    """The worker in this process (for debugging: a crash here ends the whole run)."""

    def sink(ev):
        if ev["event"] == "record":
            report.put(doc, ev["record"])
            save()
        elif ev["event"] == "info" and "model_info" in ev:
            doc["models"][spec.name] = ev["model_info"]

    opts = opts_from_args(args)
    doc["runs"][-1].update(device_meta(opts.device))
    limits = Limits(deadline)
    try:
        run_model(spec, plan, opts, Emitter(sink), limits)
    finally:
        limits.disarm()


# ------------------------------------------------------------------------------ self-check


def selfcheck(args) -> int:
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        fails += report.selfcheck(tmp / "report")
        log(f"table/merge checks: {'ok' if not fails else fails}")

        g = torch.Generator().manual_seed(0)
        r64 = torch.randn(1000, dtype=torch.float64, generator=g)
        noise = lambda s: s * torch.randn(1000, dtype=torch.float64, generator=g)  # noqa: E731
        ref = {"output": (r64 + noise(1e-2)).float()}
        good = {"output": (r64 + noise(1e-2)).float()}
        bad = {"output": (r64 + noise(2e-1)).float()}
        r64d = {"output": r64}
        acc = [check_accuracy(ref, x, r64d, 1e-3)[0] for x in (good, bad)]
        acc.append(check_accuracy(ref, {"output": ref["output"].half()}, r64d, 1e-3)[0])
        acc.append(check_accuracy(ref, {}, r64d, 1e-3)[0])
        if acc != ["pass", "fail", "fail", "fail"]:
            fails.append(f"accuracy rule: got {acc}, expected pass, fail, fail, fail")
        log(f"accuracy checks: {acc}")

        limits = Limits(None)
        try:
            with limits.compile_limit(0.3):
                time.sleep(5)
            fails.append("compile limit did not interrupt a sleep")
        except BudgetExceeded as e:
            if e.which != "compile":
                fails.append(f"compile limit raised {e.which!r}")
        limits.disarm()
        if not args.selfcheck_full:
            return _selfcheck_result(fails)

        # the supervisor on a tiny model: a worker that crashes in torch.compile's first call
        # must leave eager and danlu measured; one that hangs must be killed at the deadline
        # (torch.compile itself is never called, to keep this quick)
        for hook, budget, backends, expect in (
            ("crash:torch", 240, ["eager", "torch", "danlu"], {"eager": "ok", "torch": "crash"}),
            (
                "crash:torch+together",
                240,
                ["eager", "torch", "danlu"],
                {"eager": "ok", "torch": "crash"},
            ),
            ("hang:danlu", 60, ["eager", "danlu"], {"eager": "skipped", "danlu": "timeout"}),
            ("slow:danlu", 240, ["eager", "danlu"], {"eager": "ok", "danlu": "timeout"}),
        ):
            sub = argparse.Namespace(**vars(args))
            sub.small, sub.device, sub.iters, sub.warmup, sub.grace = True, "cpu", 3, 1, 3
            sub.compile_timeout = 5 if hook.startswith("slow") else None
            sub.time_budget, sub.deadline, sub.inprocess = budget, None, False
            sub.together, sub.min_worker_time = hook.endswith("+together"), 5
            sub.out = str(tmp / hook.replace(":", "_").replace("+", "_"))
            name, hook = hook, hook.split("+")[0]
            os.environ[SELFCHECK_HOOK] = hook
            try:
                doc = orchestrate(sub, ["selfcheck_mlp"], ["train"], backends)
            finally:
                os.environ.pop(SELFCHECK_HOOK, None)
            got = {r["backend"]: r["status"] for r in doc["records"]}
            for b, status in expect.items():
                if got.get(b) != status:
                    fails.append(f"{name}: {b} is {got.get(b)!r}, expected {status!r} ({got})")
            if hook == "crash:torch" and got.get("danlu") in ("crash", "skipped", None):
                fails.append(f"{name}: danlu did not run after torch's worker died ({got})")
            if sorted(got) != sorted(backends):
                fails.append(f"{name}: records for {sorted(got)}, expected {sorted(backends)}")
            log(f"supervisor with {name}: {got}")
    return _selfcheck_result(fails)


def _selfcheck_result(fails: list[str]) -> int:
    for f in fails:
        print("SELFCHECK FAIL:", f)
    print("selfcheck:", "ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


# ------------------------------------------------------------------------------------- CLI


def _names(text: str, valid, what: str) -> list[str]:
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        items = GROUPS.get(item, [item]) if what == "model" else [item]
        for x in items:
            if x not in valid:
                raise SystemExit(f"unknown {what} {x!r}; valid: {', '.join(valid)}")
            if x not in out:
                out.append(x)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="all", help="names or groups (all, transformers, timm)")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--backends", default="eager,torch,danlu")
    ap.add_argument("--iters", type=int, default=20, help="timed interleaved rounds")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/gpu_models/latest")
    ap.add_argument("--time-budget", type=float, default=480.0, help="seconds per model")
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole run")
    ap.add_argument("--compile-timeout", type=float, default=None, help="seconds per first call")
    ap.add_argument(
        "--min-model-time",
        type=float,
        default=60.0,
        help="don't start a model with less than this left of --deadline",
    )
    ap.add_argument(
        "--grace",
        type=float,
        default=45.0,
        help="seconds past a model's deadline before its worker is killed",
    )
    ap.add_argument("--small", action="store_true", help="tiny sizes (CPU smoke test)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--tol-train", type=float, default=1e-2)
    ap.add_argument("--tol-infer", type=float, default=1e-3)
    ap.add_argument("--no-fp64", action="store_true", help="no float64 reference (cosine rule)")
    ap.add_argument(
        "--together",
        action="store_true",
        help="all backends in one worker, timed three-way interleaved (default: each compiler "
        "in a worker of its own, interleaved with eager)",
    )
    ap.add_argument(
        "--min-worker-time",
        type=float,
        default=60.0,
        help="seconds of a model's budget kept for each later worker of that model",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="workers (model x compiler) run side by side, each within --time-budget of its "
        "own; a worker warms up and times alone, the others stopped (SIGSTOP) meanwhile. "
        "Compile times are then measured on a shared machine (pauses taken out)",
    )
    ap.add_argument(
        "--ro-modes",
        default="infer",
        help="modes the reduce-overhead backends (torch-ro, danlu-ro) run in",
    )
    ap.add_argument("--inprocess", action="store_true", help="no worker processes (debugging)")
    ap.add_argument("--merge", nargs="+", metavar="DIR", help="combine results of several runs")
    ap.add_argument(
        "--warm-table",
        nargs=2,
        metavar=("COLD", "WARM"),
        help="compile times of a run with empty caches against a rerun on the caches it filled",
    )
    ap.add_argument("--selfcheck", action="store_true", help="table, merge, accuracy rule")
    ap.add_argument(
        "--selfcheck-full",
        action="store_true",
        help="also the supervisor with workers that crash, hang or compile slowly (minutes)",
    )
    ap.add_argument("--list", action="store_true", help="print the models and their sizes")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--worker-deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        worker_main(args)
        return 0
    if args.selfcheck or args.selfcheck_full:
        return selfcheck(args)
    if args.warm_table:
        cold, warm = (report.load(pathlib.Path(d)) for d in args.warm_table)
        print(report.warm_start_table(cold, warm))
        return 0
    if args.merge:
        docs = [report.load(pathlib.Path(d)) for d in args.merge]
        merged = report.merge(docs)
        report.write(merged, pathlib.Path(args.out))
        print(report.render(merged))
        return 0
    if args.list:
        for spec in SPECS:
            if spec.listed:
                print(f"{spec.name:22} needs {spec.family:12} {missing_dependency(spec) or 'ok'}")
        return 0
    names = _names(args.models, [s.name for s in SPECS], "model")
    modes = _names(args.modes, MODES, "mode")
    backends = _names(args.backends, BACKENDS, "backend")
    if "eager" not in backends:
        backends.insert(0, "eager")  # the reference every speedup and accuracy check needs
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `timeout` ends us cleanly
    log(f"models {names}, modes {modes}, backends {backends}, device {args.device}, out {args.out}")
    try:
        doc = orchestrate(args, names, modes, backends)
    except KeyboardInterrupt:
        print(report.render(report.load(pathlib.Path(args.out))))
        return 130
    print(report.render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
