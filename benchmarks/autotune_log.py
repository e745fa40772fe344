"""What autotuning bought, from a ``DANLU_AUTOTUNE_LOG`` file (one JSON line per tuned kernel,
written by danlu_inductor's Triton launcher on the GPU).

Per kernel kind: how many kernels, how often each candidate place won, the build seconds
each place cost (summed over kernels), and what building only the first k candidates would
have cost at run time: over kernels, the best time among the first k minus the best among
all, times the kernel's call sites in its graph (a repeated layer launches one kernel from
several), in microseconds a call of each graph.

    python benchmarks/autotune_log.py autotune.jsonl [--markdown]
"""

from __future__ import annotations

import argparse
import collections
import json


def summarize(records: list[dict]) -> dict:
    """-> {kind: {"kernels", "wins": [count per place], "build_s": [seconds per place],
    "loss_us_first_k": [us lost building only the first k, k = 1..]}}."""
    out: dict[str, dict] = {}
    seen = set()
    for r in records:
        key = (r["kernel"], r["kind"], str(r["xnumel"]), str(r["rnumel"]))
        if key in seen:  # the same kernel tuned in several processes (suite workers)
            continue
        seen.add(key)
        cands = r["candidates"]
        times = [c[4] for c in cands]
        timed = [t for t in times if t is not None]
        if not timed:
            continue
        s = out.setdefault(
            r["kind"],
            {
                "kernels": 0,
                "wins": collections.Counter(),
                "build_s": collections.Counter(),
                "loss_us_first_k": collections.Counter(),
            },
        )
        s["kernels"] += 1
        if r.get("chosen") is not None:
            s["wins"][r["chosen"]] += 1
        for i, c in enumerate(cands):
            s["build_s"][i] += c[3] or 0.0
        best = min(timed)
        for k in range(1, len(cands) + 1):
            first = [t for t in times[:k] if t is not None]
            # nothing among the first k built: that kernel would fall back to its first place
            lost = (min(first) - best) if first else (max(timed) - best)
            s["loss_us_first_k"][k] += lost * 1000 * r.get("call_sites", 1)
    for s in out.values():
        n = max(list(s["wins"]) + list(s["build_s"]) + [0]) + 1
        s["wins"] = [s["wins"][i] for i in range(n)]
        s["build_s"] = [round(s["build_s"][i], 1) for i in range(n)]
        s["loss_us_first_k"] = [round(s["loss_us_first_k"][k], 1) for k in range(1, n + 1)]
    return out


def markdown(summary: dict) -> str:
    lines = [
        "| kind | kernels | wins by place | build s by place | us lost building only the "
        "first k (k=1..) |",
        "|---|---|---|---|---|",
    ]
    for kind, s in sorted(summary.items()):
        lines.append(
            f"| {kind} | {s['kernels']} | {s['wins']} | {s['build_s']} | {s['loss_us_first_k']} |"
        )
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("log")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    with open(args.log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    summary = summarize(records)
    print(markdown(summary) if args.markdown else json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
