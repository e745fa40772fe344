"""Print a short summary of what run_gpu_checks.sh wrote: python summarize_gpu_checks.py OUT."""

from __future__ import annotations

import json
import pathlib
import sys


def _load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"_missing": str(e)}


def main(out):
    out = pathlib.Path(out)
    for name in ("wrapper_cuda", "cases_cuda"):
        r = _load(out / f"{name}.json")
        if "_missing" in r:
            print(name, "missing:", r["_missing"])
            continue
        ok = [k for k, v in r.items() if v.get("ok")]
        bad = {k: v.get("error", "")[-400:] for k, v in r.items() if not v.get("ok")}
        print(f"{name}: {len(ok)}/{len(r)} ok; failed: {sorted(bad)}")
        for k, v in bad.items():
            print(" ", k, v.replace("\n", " | ")[-400:])
        for k, v in r.items():
            keys = ("eager_us", "eager_graph_us", "compiled_us", "compiled_graph_us")
            if any(x in v for x in keys) or k == "cudagraphs_option":
                print(" ", k, {x: v.get(x) for x in (*keys, "cudagraphs", "bad_index") if x in v})
            if k == "max_autotune":
                print(" ", k, {n: d for n, d in v.items() if isinstance(d, dict)})
        if "opinfo" in r and r["opinfo"].get("ok"):
            op = r["opinfo"]
            fails = {k: v[:1] for k, v in op["failures"].items()}
            print("  opinfo samples", sum(op["samples"].values()), "failures", fails)
    g = _load(out / "gpt2.json")
    for dtype in ("fp32", "bf16"):
        row = g.get(dtype)
        if row:
            skip = ("_error", "_graphs", "_profile")
            print(dtype, {k: v for k, v in row.items() if not k.endswith(skip)})
            for k, v in row.items():
                if k.endswith("_error"):
                    print(" ", k, v.replace("\n", " | ")[-600:])
                if k.endswith("_profile"):
                    print(v)
                if k.endswith("_graphs"):
                    print(" ", k, [(r["backend"], r["kernels"], r.get("cudagraphs")) for r in v])


if __name__ == "__main__":
    main(sys.argv[1])
