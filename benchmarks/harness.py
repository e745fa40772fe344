"""One benchmark harness for the model and micro suites, following the PT2 method.

For each case: build the model once per compiler from the same seed, compile (timing the first
calls, which include compilation), check accuracy against eager by the PT2 rule, warm up, then
time eager and each compiled variant *interleaved* (one call each per round, so drift in machine
load hits all alike), take the median, and report speedup = eager / compiled. The geomean
covers only cases that passed accuracy. Writes JSON, a markdown table, and a PNG plot.

    python benchmarks/harness.py --suite micro --out benchmarks/results/cpu
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from danlu.testing import same

sys.path.insert(0, str(pathlib.Path(__file__).parent))

PHASES = ("capture", "autograd", "lowering", "codegen", "backend compile", "other")


@dataclass
class Case:
    name: str
    make_model: Callable[[], torch.nn.Module]
    make_inputs: Callable[[], tuple]
    train: bool = False


@dataclass
class Result:
    case: str
    compiler: str
    mode: str
    median_s: float | None = None
    speedup: float | None = None
    compile_s: float | None = None
    peak_mem_mb: float | None = None
    accuracy: str = "not run"
    error: str | None = None
    extra: dict = field(default_factory=dict)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def step_fn(model, inputs, train):
    """One inference call, or one training step (forward, loss, backward) returning loss+grads."""
    if not train:
        with torch.no_grad():
            return model(*inputs)
    out = model(*inputs)
    loss = _as_loss(out)
    loss.backward()
    leaves = [*model.parameters(), *(t for t in inputs if isinstance(t, torch.Tensor))]
    grads = [t.grad.clone() for t in leaves if t.grad is not None]
    for t in leaves:
        t.grad = None
    return loss.detach(), grads


def _as_loss(out):
    if isinstance(out, torch.Tensor):
        return out.float().mean() if out.dim() else out
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    return sum(t.float().mean() for t in leaves if t.is_floating_point())


def _fp64(model, inputs, train):
    """The same model and inputs in float64, for the PT2 accuracy rule (None if it fails)."""
    try:
        m64 = copy.deepcopy(model).double()
        in64 = tuple(
            t.detach().double().requires_grad_(t.requires_grad)
            if isinstance(t, torch.Tensor) and t.is_floating_point()
            else t
            for t in inputs
        )
        return step_fn(m64, in64, train)
    except Exception:  # a model that cannot run in float64: fall back to allclose
        return None


def make_compilers(names: list[str], mode: str | None):
    compilers = {}
    for name in names:
        if name == "eager":
            compilers[name] = lambda m: m
        elif name == "torch.compile":
            compilers[name] = lambda m: torch.compile(m, mode=mode)
        elif name == "danlu":
            import danlu

            def danlu_compile(m):
                danlu.reset()  # so CompileStats holds this case only
                return danlu.compile(m, mode=mode)

            compilers[name] = danlu_compile
        else:
            raise ValueError(name)
    return compilers


def run_case(case: Case, compilers: dict, *, device, warmup: int, iters: int) -> list[Result]:
    mode = "train" if case.train else "infer"
    torch.manual_seed(0)
    base = case.make_model().to(device)
    base.train(case.train)
    inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in case.make_inputs())
    if case.train:  # training also differentiates float inputs (micro cases have no parameters)
        inputs = tuple(
            t.detach().requires_grad_()
            if isinstance(t, torch.Tensor) and t.is_floating_point()
            else t
            for t in inputs
        )
    ref = step_fn(base, inputs, case.train)
    ref64 = _fp64(base, inputs, case.train)
    variants, results = {}, {}
    for name, compile_ in compilers.items():
        r = Result(case.name, name, mode)
        results[name] = r
        try:
            model = copy.deepcopy(base)
            fn = compile_(model)
            sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            out = step_fn(fn, inputs, case.train)
            sync(device)
            r.compile_s = time.perf_counter() - start
            r.accuracy = "pass" if same(ref, out, ref64) else "fail"
            if ref64 is None:
                r.extra["accuracy_rule"] = "allclose (no float64 reference)"
            if name == "danlu":
                r.extra.update(_danlu_report())
            variants[name] = fn
        except Exception as e:  # a failing compiler is a result, not a crash of the suite
            r.error = f"{type(e).__name__}: {e}"[:300]
            r.accuracy = "error"

    def failed(name, e):  # a compiler failing after its first call: an error, not a crash
        results[name].error = f"{type(e).__name__}: {e}"[:300]
        results[name].accuracy = "error"
        variants.pop(name)

    for _ in range(warmup):
        for name, fn in list(variants.items()):
            try:
                step_fn(fn, inputs, case.train)
            except Exception as e:
                failed(name, e)
    times = {name: [] for name in variants}
    for _ in range(iters):
        for name, fn in list(variants.items()):  # interleaved: one call of each per round
            sync(device)
            start = time.perf_counter()
            try:
                step_fn(fn, inputs, case.train)
            except Exception as e:
                failed(name, e)
                times.pop(name)
                continue
            sync(device)
            times[name].append(time.perf_counter() - start)
    if device.type == "cuda":
        for name, fn in variants.items():
            torch.cuda.reset_peak_memory_stats()
            step_fn(fn, inputs, case.train)
            results[name].peak_mem_mb = torch.cuda.max_memory_allocated() / 2**20
    eager_t = statistics.median(times["eager"]) if "eager" in times else None
    for name, ts in times.items():
        r = results[name]
        r.median_s = statistics.median(ts)
        if eager_t:
            r.speedup = eager_t / r.median_s
    variants.clear()
    gc.collect()
    return list(results.values())


def _danlu_report() -> dict:
    """What danlu compiled for this case: graphs, breaks, kernels, seconds per phase."""
    import danlu

    stats = danlu.CompileStats.current()
    return {
        "graphs": len(stats.graphs),
        "graph_breaks": stats.graph_breaks,
        "kernels": sum(k.kernels for k in stats.kernel_graphs),
        "aten_fallbacks": sum(sum(k.fallback_ops.values()) for k in stats.kernel_graphs),
        "phases_s": {k: round(v, 3) for k, v in stats.phases.items()},
    }


def _commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(results: list[Result], compilers: list[str]) -> str:
    lines = [
        "| case | mode | eager ms | "
        + " | ".join(f"{c} speedup | {c} compile s | {c} acc" for c in compilers if c != "eager")
        + " |",
        "|---|---|---|" + "---|---|---|" * (len(compilers) - 1),
    ]
    by_case: dict[tuple, dict] = {}
    for r in results:
        by_case.setdefault((r.case, r.mode), {})[r.compiler] = r
    for (case, mode), rs in by_case.items():
        cells = []
        for c in compilers:
            if c == "eager":
                continue
            r = rs.get(c)
            sp = f"{r.speedup:.2f}x" if r and r.speedup else "—"
            cs = f"{r.compile_s:.1f}" if r and r.compile_s is not None else "—"
            acc = r.accuracy if r else "—"
            if r and r.error:
                acc = f"error: {r.error[:60]}"
            cells.append(f"{sp} | {cs} | {acc}")
        eager = rs.get("eager")
        eager_ms = f"{eager.median_s * 1e3:.1f}" if eager and eager.median_s else "—"
        lines.append(f"| {case} | {mode} | {eager_ms} | " + " | ".join(cells) + " |")
    phased = [r for r in results if r.compiler == "danlu" and r.extra.get("phases_s")]
    if phased:
        names = [p for p in PHASES if any(p in r.extra["phases_s"] for r in phased)]
        lines += [
            "",
            "danlu compile, seconds per phase (graphs / graph breaks / generated kernels):",
            "",
            "| case | mode | graphs | breaks | kernels | " + " | ".join(names) + " |",
            "|---|---|---|---|---|" + "---|" * len(names),
        ]
        for r in phased:
            ph = r.extra["phases_s"]
            cells = " | ".join(f"{ph[p]:.2f}" if p in ph else "—" for p in names)
            lines.append(
                f"| {r.case} | {r.mode} | {r.extra['graphs']} | {r.extra['graph_breaks']} "
                f"| {r.extra['kernels']} | {cells} |"
            )
        lines.append("")
    for c in compilers:
        if c == "eager":
            continue
        g = geomean([r.speedup for r in results if r.compiler == c and r.accuracy == "pass"])
        lines.append(
            f"\ngeomean speedup over eager, {c} (cases passing accuracy): "
            + (f"{g:.2f}x" if g else "—")
        )
    return "\n".join(lines)


def plot(results: list[Result], path: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cases = sorted({(r.case, r.mode) for r in results})
    comps = sorted({r.compiler for r in results if r.compiler != "eager"})
    fig, ax = plt.subplots(figsize=(max(6, len(cases) * 1.2), 4))
    width = 0.8 / max(1, len(comps))
    for i, c in enumerate(comps):
        vals = []
        for case in cases:
            r = next((r for r in results if (r.case, r.mode) == case and r.compiler == c), None)
            vals.append(r.speedup if r and r.speedup and r.accuracy == "pass" else 0)
        ax.bar([j + i * width for j in range(len(cases))], vals, width, label=c)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks([j + width * (len(comps) - 1) / 2 for j in range(len(cases))])
    ax.set_xticklabels([f"{c}\n{m}" for c, m in cases], fontsize=7)
    ax.set_ylabel("speedup over eager")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="micro", choices=["micro", "models", "cpu10", "all"])
    ap.add_argument("--compilers", default="eager,torch.compile,danlu")
    ap.add_argument("--mode", default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--modes", default="infer,train", help="infer, train or both")
    ap.add_argument("--out", default="benchmarks/results/latest")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    import suites

    cases = suites.get(args.suite, args.device)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.name in wanted]
    modes = set(args.modes.split(","))
    cases = [c for c in cases if ("train" if c.train else "infer") in modes]
    names = args.compilers.split(",")
    compilers = make_compilers(names, args.mode)
    device = torch.device(args.device)
    results = []
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    t_start, load_start = time.perf_counter(), list(os.getloadavg())
    for case in cases:
        rs = run_case(case, compilers, device=device, warmup=args.warmup, iters=args.iters)
        for r in rs:
            print(
                f"{r.case:24} {r.mode:6} {r.compiler:14} median={r.median_s} speedup={r.speedup} compile={r.compile_s} acc={r.accuracy} {r.error or ''}",
                flush=True,
            )
        results.extend(rs)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "argv": sys.argv,
        "commit": _commit(),
        "started_utc": started,
        "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "wall_s": round(time.perf_counter() - t_start, 1),
        "loadavg_start": load_start,
        "loadavg_end": list(os.getloadavg()),
    }
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "results": [asdict(r) for r in results]}, indent=1)
    )
    table = summarize(results, names)
    (out / "table.md").write_text(table + "\n")
    plot(results, out / "speedups.png")
    print(table)


if __name__ == "__main__":
    main()
