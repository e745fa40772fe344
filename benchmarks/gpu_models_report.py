"""Tables, merging and plots for the GPU model suite's records (no torch needed).

A results document is `{"runs": [meta, ...], "models": {name: info}, "records": [record, ...]}`;
one record per (model, mode, backend):

    status      ok | error | oom | timeout | crash | skipped
    reason      why, for anything but ok
    accuracy    reference (eager) | pass | fail | unchecked
    median_ms, times_ms, iters, speedup (eager median / this median)
    first_call_s, compile_s (first call minus one eager call)
    peak_mem_mb (absolute), step_mem_mb (peak above what was allocated before the step)
    notes       what the compiler reported (graphs, graph breaks, kernels), accuracy details

The geomean covers records that ran (status ok) and passed accuracy, as on torch.compile's
dashboard; the clipped variant counts every speedup below 1.0x as 1.0x, as the dashboard does.
"""

from __future__ import annotations

import json
import math
import pathlib

BACKENDS = {
    "eager": "eager",
    "torch": "torch.compile",
    "danlu": "danlu.compile",
    "torch-ro": "torch.compile reduce-overhead",
    "danlu-ro": "danlu.compile reduce-overhead",
}
MODE_ORDER = {"train": 0, "infer": 1}
FILES = ("results.json", "table.md", "speedups.png")


def key(r: dict) -> tuple:
    return (r["model"], r["mode"], r["backend"])


def new_doc(meta: dict | None = None) -> dict:
    return {"runs": [meta] if meta else [], "models": {}, "records": []}


def put(doc: dict, record: dict) -> None:
    """Add a record, replacing an earlier one for the same (model, mode, backend) unless the new
    one is only a skip and the old one ran."""
    for i, old in enumerate(doc["records"]):
        if key(old) == key(record):
            if record["status"] == "skipped" and old["status"] != "skipped":
                return
            doc["records"][i] = record
            return
    doc["records"].append(record)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def passing(r: dict) -> bool:
    return r["status"] == "ok" and r.get("accuracy") == "pass" and bool(r.get("speedup"))


def summary_rows(doc: dict) -> list[dict]:
    """One row per (backend, mode): geomeans over models that passed, pass counts, compile time
    and memory ratio."""
    recs = doc["records"]
    rows = []
    modes = sorted({r["mode"] for r in recs}, key=lambda m: MODE_ORDER.get(m, 9))
    for backend in BACKENDS:
        if backend == "eager":
            continue
        for mode in modes:
            mine = [r for r in recs if r["backend"] == backend and r["mode"] == mode]
            if not mine:
                continue
            models = sorted({r["model"] for r in recs if r["mode"] == mode})
            ok = [r for r in mine if passing(r)]
            eager = {
                r["model"]: r
                for r in recs
                if r["backend"] == "eager" and r["mode"] == mode and r["status"] == "ok"
            }
            # reduce-overhead's CUDA-graph pools are allocated before the step: no ratio
            ratios = [
                eager[r["model"]]["step_mem_mb"] / r["step_mem_mb"]
                for r in ok
                if r.get("step_mem_mb")
                and eager.get(r["model"], {}).get("step_mem_mb")
                and not backend.endswith("-ro")
            ]
            compiles = [r["compile_s"] for r in ok if r.get("compile_s") is not None]
            rows.append(
                {
                    "backend": backend,
                    "mode": mode,
                    "passed": len(ok),
                    "models": len(models),
                    "geomean": geomean([r["speedup"] for r in ok]),
                    "geomean_clipped": geomean([max(1.0, r["speedup"]) for r in ok]),
                    "mean_compile_s": sum(compiles) / len(compiles) if compiles else None,
                    "memory_ratio": geomean(ratios),
                }
            )
    return rows


def _fmt(v, spec, suffix=""):
    return "—" if v is None else f"{v:{spec}}{suffix}"


class Footnotes:
    """Numbered reasons below the table; records with the same reason share one number."""

    def __init__(self):
        self.items: dict[str, list[str]] = {}  # reason -> names of the records

    def add(self, r: dict, what: str) -> int:
        reason = r.get("reason") or ""
        detail = (r.get("notes") or {}).get("accuracy_failures")
        if detail:
            reason = (reason + "; " if reason else "") + "; ".join(detail[:3])
        reason = " ".join(reason.split())[:400]
        text = what + (f": {reason}" if reason else "")
        names = self.items.setdefault(text, [])
        names.append(f"{r['model']} {r['mode']} {BACKENDS.get(r['backend'], r['backend'])}")
        return list(self.items).index(text) + 1

    def lines(self) -> list[str]:
        out = []
        for i, (text, names) in enumerate(self.items.items(), 1):
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            out.append(f"{i}. {shown}: {text}")
        return out


def _cell_status(r: dict, footnotes: Footnotes) -> str:
    if r["status"] == "ok":
        acc = r.get("accuracy") or "unchecked"
        if acc == "fail":
            return f"**fail** [{footnotes.add(r, 'accuracy fail')}]"
        return acc
    return f"{r['status']} [{footnotes.add(r, r['status'])}]"


def render(doc: dict) -> str:
    recs = {key(r): r for r in doc["records"]}
    rows = sorted(
        {(m, mode) for m, mode, _ in recs},
        key=lambda t: (_model_order(doc, t[0]), MODE_ORDER.get(t[1], 9)),
    )
    present = [b for b in BACKENDS if any(k[2] == b for k in recs)]
    compiled = [b for b in present if b != "eager"]
    out = [_run_line(run) for run in doc["runs"]]
    out.append("")
    head = "| model | mode | eager ms | eager mem GB |"
    rule = "|---|---|---|---|"
    for b in compiled:
        head += f" {BACKENDS[b]} speedup | compile s | mem GB | accuracy |"
        rule += "---|---|---|---|"
    out += [head, rule]
    footnotes = Footnotes()
    for model, mode in rows:
        e = recs.get((model, mode, "eager"))
        if e and e["status"] == "ok":
            cells = [_fmt(e.get("median_ms"), ".2f"), _fmt(_gb(e), ".2f")]
        elif e:
            cells = [_cell_status(e, footnotes), "—"]
        else:
            cells = ["—", "—"]
        for b in compiled:
            r = recs.get((model, mode, b))
            if r is None:
                cells += ["—"] * 4
                continue
            sp = _fmt(r.get("speedup"), ".2f", "x") if r["status"] == "ok" else "—"
            cs = _fmt(r.get("compile_s"), ".1f")
            cells += [sp, cs, _fmt(_gb(r), ".2f"), _cell_status(r, footnotes)]
        out.append(f"| {model} | {mode} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| backend | mode | models passing | geomean speedup | geomean, each ≥1.0x |"
        " mean compile s | memory eager/backend (geomean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary_rows(doc):
        out.append(
            f"| {BACKENDS[s['backend']]} | {s['mode']} | {s['passed']}/{s['models']} | "
            f"{_fmt(s['geomean'], '.2f', 'x')} | {_fmt(s['geomean_clipped'], '.2f', 'x')} | "
            f"{_fmt(s['mean_compile_s'], '.1f')} | {_fmt(s['memory_ratio'], '.2f', 'x')} |"
        )
    out += direct_table(doc)
    notes = _compiler_notes(doc)
    if footnotes.items:
        out += ["", "Failures and skips:", ""]
        out += footnotes.lines()
    if notes:
        out += ["", "Notes (what the compilers reported on the first call, and caveats):", ""]
        out += [f"- {n}" for n in notes]
    out += [
        "",
        "Speedup: eager median / backend median (higher is better). Geomeans cover models that "
        "ran and passed accuracy. Compile s: first call minus one eager call. Mem GB: peak of "
        "one step above the memory allocated before it (weights of all resident copies are "
        "excluded).",
    ]
    return "\n".join(out) + "\n"


# compiler pairs compared on their own medians: (label, torch.compile's backend, danlu's)
PAIRS = (("default", "torch", "danlu"), ("reduce-overhead", "torch-ro", "danlu-ro"))


def direct_rows(doc: dict) -> list[dict]:
    """Per (model, mode): torch.compile's median over danlu's (above 1: danlu is faster),
    for each compiler pair that both ran and passed; the spread of eager's medians over the
    workers (each speedup is against its own worker's eager run, so a spread of 1.3 moves a
    speedup by up to 30% whatever the compiler did); the most CPU cores other processes
    kept busy while one of them timed."""
    recs = {key(r): r for r in doc["records"]}
    rows = []
    for model, mode in sorted(
        {(m, md) for m, md, _ in recs},
        key=lambda t: (_model_order(doc, t[0]), MODE_ORDER.get(t[1], 9)),
    ):
        mine = [r for (m, md, _), r in recs.items() if (m, md) == (model, mode)]
        row = {"model": model, "mode": mode}
        for label, tb, db in PAIRS:
            t, d = recs.get((model, mode, tb)), recs.get((model, mode, db))
            if t and d and passing(t) and passing(d):
                row[label] = t["median_ms"] / d["median_ms"]
        eagers = [r["eager_median_ms"] for r in mine if r.get("eager_median_ms")]
        if len(eagers) > 1:
            row["eager_spread"] = max(eagers) / min(eagers)
        busy = [r["others_cpu_cores"] for r in mine if r.get("others_cpu_cores") is not None]
        if busy:
            row["others_cpu"] = max(busy)
        rows.append(row)
    return rows


def direct_table(doc: dict) -> list[str]:
    rows = direct_rows(doc)
    if not any(label in r for r in rows for label, _, _ in PAIRS):
        return []
    out = [
        "",
        "danlu against torch.compile on their own medians (torch.compile ms / danlu ms; "
        "above 1.00 danlu is faster), beside the spread of eager's medians over the workers "
        "(max / min) and the most CPU cores other processes used while a worker timed:",
        "",
        "| model | mode | default | reduce-overhead | eager spread | others' CPU cores |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [_fmt(r.get(label), ".2f") for label, _, _ in PAIRS]
        cells += [_fmt(r.get("eager_spread"), ".2f"), _fmt(r.get("others_cpu"), ".1f")]
        out.append(f"| {r['model']} | {r['mode']} | " + " | ".join(cells) + " |")
    modes = sorted({r["mode"] for r in rows}, key=lambda m: MODE_ORDER.get(m, 9))
    for label, _, _ in PAIRS:
        for mode in modes:
            g = geomean([r[label] for r in rows if r["mode"] == mode and label in r])
            if g:
                n = sum(1 for r in rows if r["mode"] == mode and label in r)
                out.append(f"| **geomean** | {mode} | {label}: {g:.2f} over {n} models | | | |")
    return out


def _gb(r: dict):
    v = r.get("step_mem_mb")
    return None if v is None else v / 1024


def _model_order(doc: dict, model: str) -> int:
    order = doc.get("model_order") or []
    return order.index(model) if model in order else len(order)


def _run_line(meta: dict) -> str:
    parts = [
        meta.get("device_name") or meta.get("device", "?"),
        f"torch {meta.get('torch', '?')}",
        f"triton {meta.get('triton') or '—'}",
        f"transformers {meta.get('transformers') or '—'}",
        f"timm {meta.get('timm') or '—'}",
        f"Python {meta.get('python', '?')}",
        meta.get("precision_label", "?"),
        f"{meta.get('iters', '?')} timed rounds after {meta.get('warmup', '?')} warm-up",
        f"started {meta.get('started', '?')}",
    ]
    cmd = meta.get("command")
    return "Run: " + ", ".join(str(p) for p in parts) + (f"; command `{cmd}`" if cmd else "")


def _compiler_notes(doc: dict) -> list[str]:
    lines = []
    for r in sorted(
        doc["records"],
        key=lambda r: (_model_order(doc, r["model"]), MODE_ORDER.get(r["mode"], 9), r["backend"]),
    ):
        notes = r.get("notes") or {}
        parts = [
            notes[k] for k in ("compiler", "accuracy_rule", "timing", "memory") if notes.get(k)
        ]
        if parts:
            lines.append(
                f"{r['model']} {r['mode']} {BACKENDS.get(r['backend'])}: " + "; ".join(parts)
            )
    return lines


def plot(doc: dict, path: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    recs = {key(r): r for r in doc["records"]}
    cases = sorted(
        {(m, mode) for m, mode, _ in recs},
        key=lambda t: (_model_order(doc, t[0]), MODE_ORDER.get(t[1], 9)),
    )
    comps = [b for b in BACKENDS if b != "eager" and any(k[2] == b for k in recs)]
    if not cases or not comps:
        return False
    fig, ax = plt.subplots(figsize=(max(6, len(cases) * 0.9), 4.5))
    width = 0.8 / len(comps)
    values = [r["speedup"] for r in recs.values() if passing(r) and r["backend"] != "eager"]
    log_scale = bool(values) and max(values) / min(values) > 8
    if log_scale:
        ax.set_yscale("log", base=2)
    bottom = min([1.0, *values]) / 1.5 if log_scale else 0.0
    for i, b in enumerate(comps):
        xs, ys = [], []
        for j, case in enumerate(cases):
            x = j + i * width
            r = recs.get((*case, b))
            if r and passing(r):
                xs.append(x)
                ys.append(r["speedup"])
                ax.text(
                    x, r["speedup"], f"{r['speedup']:.2f}", fontsize=6, ha="center", va="bottom"
                )
            elif r:
                label = r["status"] if r["status"] != "ok" else "acc fail"
                ax.text(x, bottom, label, rotation=90, fontsize=6, ha="center", va="bottom")
        ax.bar(xs, ys, width, label=BACKENDS[b], bottom=None)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks([j + width * (len(comps) - 1) / 2 for j in range(len(cases))])
    ax.set_xticklabels([f"{m.split('_patch')[0]}\n{mode}" for m, mode in cases], fontsize=7)
    ax.set_ylabel("speedup over eager" + (" (log scale)" if log_scale else ""))
    ax.set_title("GPU model suite: speedup over eager (no bar: failed or not run)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(doc: dict, out: pathlib.Path, with_plot: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out / "results.json")  # never a half-written file if the run is killed
    (out / "table.md").write_text(render(doc))
    if with_plot:
        try:
            plot(doc, out / "speedups.png")
        except Exception as e:  # a plot is optional; the table and JSON are the results
            print(f"plot failed: {type(e).__name__}: {e}", flush=True)


def load(path: pathlib.Path) -> dict:
    p = path / "results.json" if path.is_dir() else path
    doc = json.loads(p.read_text())
    for name in ("runs", "models", "records"):
        if name not in doc:
            raise ValueError(f"{p}: not a GPU model suite results file (no {name!r})")
    return doc


def warm_start_table(cold: dict, warm: dict) -> str:
    """Compile time of each compiler's first call, cold (empty caches) against warm (a new
    process finding the caches the cold run filled): the same suite run twice."""
    before = {key(r): r for r in cold["records"]}
    out = ["| model | mode | compiler | cold compile s | warm compile s | warm accuracy |"]
    out.append("|---|---|---|---|---|---|")
    for r in sorted(
        warm["records"],
        key=lambda r: (_model_order(cold, r["model"]), MODE_ORDER.get(r["mode"], 9), r["backend"]),
    ):
        if r["backend"] == "eager":
            continue
        c = before.get(key(r), {})
        out.append(
            f"| {r['model']} | {r['mode']} | {BACKENDS.get(r['backend'], r['backend'])} | "
            f"{_fmt(c.get('compile_s'), '.1f')} | {_fmt(r.get('compile_s'), '.1f')} | "
            f"{r.get('accuracy') or r['status']} |"
        )
    return "\n".join(out)


def merge(docs: list[dict]) -> dict:
    """Later documents win for the same (model, mode, backend), except that a skip never
    replaces a record that ran."""
    out = new_doc()
    order: list[str] = []
    for d in docs:
        out["runs"] += d["runs"]
        out["models"].update(d["models"])
        for m in d.get("model_order") or []:
            if m not in order:
                order.append(m)
        for r in d["records"]:
            put(out, r)
    out["model_order"] = order
    return out


# ------------------------------------------------------------------------------ self-check


def _rec(model, mode, backend, status="ok", accuracy="pass", median=None, speedup=None, **kw):
    r = {
        "model": model,
        "mode": mode,
        "backend": backend,
        "status": status,
        "reason": kw.pop("reason", None),
        "accuracy": accuracy if status == "ok" else None,
        "median_ms": median,
        "speedup": speedup,
        "compile_s": kw.pop("compile_s", None),
        "step_mem_mb": kw.pop("mem", None),
        "notes": kw.pop("notes", {}),
    }
    r.update(kw)
    return r


def selfcheck(tmpdir: pathlib.Path) -> list[str]:
    """Checks the table, geomean and merge code on synthetic records; returns failures."""
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    meta = {"device": "cuda", "device_name": "Synthetic GPU", "torch": "x", "iters": 20}
    a = new_doc(dict(meta, started="A"))
    a["model_order"] = ["m1", "m2", "m3"]
    for r in [
        _rec("m1", "train", "eager", accuracy="reference", median=10.0, mem=1000.0),
        _rec("m1", "train", "torch", median=5.0, speedup=2.0, compile_s=30.0, mem=500.0),
        _rec("m1", "train", "danlu", median=20.0, speedup=0.5, compile_s=10.0, mem=2000.0),
        _rec("m2", "train", "eager", accuracy="reference", median=8.0, mem=100.0),
        _rec("m2", "train", "torch", median=1.0, speedup=8.0, compile_s=50.0, mem=100.0),
        _rec(
            "m2",
            "train",
            "danlu",
            accuracy="fail",
            median=1.0,
            speedup=8.0,
            compile_s=1.0,
            notes={"accuracy_failures": ["grad:w rmse 1 vs 0.1"]},
        ),
        _rec("m3", "train", "torch", status="skipped", reason="time budget"),
        _rec("m3", "train", "danlu", status="skipped", reason="time budget"),
    ]:
        put(a, r)
    rows = {(s["backend"], s["mode"]): s for s in summary_rows(a)}
    t, d = rows[("torch", "train")], rows[("danlu", "train")]
    check(abs(t["geomean"] - 4.0) < 1e-9, f"torch geomean {t['geomean']} != 4.0")
    check(d["passed"] == 1 and abs(d["geomean"] - 0.5) < 1e-9, "failed accuracy not excluded")
    check(abs(d["geomean_clipped"] - 1.0) < 1e-9, "clipped geomean should count 0.5x as 1.0x")
    check(d["models"] == 3, f"models counted {d['models']} != 3")
    check(abs(t["mean_compile_s"] - 40.0) < 1e-9, "mean compile time")
    check(abs(t["memory_ratio"] - 2.0**0.5) < 1e-9, f"memory ratio {t['memory_ratio']}")
    check(abs(d["memory_ratio"] - 0.5) < 1e-9, f"danlu memory ratio {d['memory_ratio']}")
    table = render(a)
    check("| m1 | train | 10.00 | 0.98 | 2.00x | 30.0 | 0.49 | pass |" in table, "m1 row")
    check("**fail** [1]" in table and "grad:w rmse" in table, "accuracy failure footnote")
    check(table.count("skipped [2]") == 2, "records with one reason share a footnote")
    check(
        "2. m3 train torch.compile, m3 train danlu.compile: skipped: time budget" in table,
        "shared footnote lists both records",
    )
    check("| torch.compile | train | 2/3 | 4.00x |" in table, "torch summary row")

    b = new_doc(dict(meta, started="B"))
    b["model_order"] = ["m3", "m1"]
    put(b, _rec("m3", "train", "eager", accuracy="reference", median=4.0))
    put(b, _rec("m3", "train", "danlu", median=2.0, speedup=2.0, compile_s=3.0))
    put(b, _rec("m1", "train", "torch", status="skipped", reason="not asked"))
    put(b, _rec("m1", "infer", "torch", median=1.0, speedup=1.5))
    for i, doc in enumerate((a, b)):
        write(doc, tmpdir / f"run{i}", with_plot=False)
    merged = merge([load(tmpdir / "run0"), load(tmpdir / "run1")])
    keys = {key(r): r for r in merged["records"]}
    check(len(merged["runs"]) == 2, "merged runs")
    check(keys[("m3", "train", "danlu")]["status"] == "ok", "a later record replaces a skip")
    check(keys[("m1", "train", "torch")]["status"] == "ok", "a skip must not replace a result")
    check(("m1", "infer", "torch") in keys, "records only in the second run are kept")
    check(merged["model_order"] == ["m1", "m2", "m3"], f"model order {merged['model_order']}")
    rows = {(s["backend"], s["mode"]): s for s in summary_rows(merged)}
    check(abs(rows[("danlu", "train")]["geomean"] - 1.0) < 1e-9, "merged danlu geomean")
    write(merged, tmpdir / "merged")
    check((tmpdir / "merged" / "table.md").read_text() == render(merged), "table file")
    bad = tmpdir / "bad.json"
    bad.write_text("{}")
    try:
        load(bad)
        fails.append("load accepted a file that is not a results document")
    except ValueError:
        pass
    return fails
