"""Differential testing of capture, the whole corpus: the capture program suite
(packages/dynamo/tests/_programs_*.py) and random programs from the fuzzer
(packages/dynamo/tests/differential.py), each run eagerly and captured by danlu-dynamo and
by torch.compile (both with the "eager" backend, so only capture is compared), then once more
with fullgraph=True. Prints a table of counts and writes JSON.

    python benchmarks/dynamo_differential.py --seeds 1000 --out /tmp/diff.json
    python benchmarks/dynamo_differential.py --seeds 200 --no-torch     # danlu only
    python benchmarks/dynamo_differential.py --seeds 500 --first-seed 1500 --no-torch --no-corpus

Counts per compiler: correct, wrong (results, mutated inputs or module state differ), raised
(compiled raised where eager did not), hung, graphs captured, graph breaks (danlu),
programs that compiled again on a later call of the same shapes, and programs that compile
under fullgraph=True.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys
import time

import torch

TESTS = pathlib.Path(__file__).resolve().parent.parent / "packages" / "dynamo" / "tests"
sys.path.insert(0, str(TESTS))

import _programs_a  # noqa: E402
import _programs_b  # noqa: E402
import differential as D  # noqa: E402
from _programs_common import clone_tree, same  # noqa: E402


def danlu_compiler(fullgraph=False):
    import danlu_dynamo

    def make():
        danlu_dynamo.reset()
        return D.danlu_dynamo_runner(fullgraph=fullgraph)

    return make


def torch_compiler(fullgraph=False):
    def make():
        torch._dynamo.reset()
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        def compile_fn(f):
            return torch.compile(f, backend=backend, fullgraph=fullgraph)

        def counts():
            return len(graphs), 0

        return compile_fn, counts

    return make


def check_corpus_case(fn, factory, make, calls=(0, 0, 1)):
    """The capture suite's programs: own inputs per shape variant, bit-for-bit comparison."""
    compile_fn, counts = make()
    compiled = compile_fn(fn)
    captured = []
    for k, v in enumerate(calls):
        g = torch.Generator().manual_seed(1000 + k)
        args = factory(g, v)
        args_e, args_c = clone_tree(args), clone_tree(args)
        torch.manual_seed(k)
        try:
            expected = fn(*args_e)
        except Exception as e:  # noqa: BLE001
            return D.Outcome("eager_error", f"{type(e).__name__}: {e}")
        torch.manual_seed(k)
        before = counts()[0]
        try:
            with D.time_limit(60):
                got = compiled(*args_c)
        except TimeoutError as e:
            return D.Outcome("hung", str(e))
        except Exception as e:  # noqa: BLE001
            return D.Outcome("raised", f"{type(e).__name__}: {str(e)[:200]}")
        captured.append(counts()[0] - before)
        if not same(expected, got) or not same(args_e, args_c):
            return D.Outcome("wrong", f"call {k}")
    graphs, breaks = counts()
    # a new shape (variant 1) may compile once more; calls of a seen shape must not
    return D.Outcome("correct", "", graphs, breaks, int(bool(captured[1])))


def run(compilers, seeds, corpus):
    rows = {}
    details = {}
    for label, make, make_full in compilers:
        c = collections.Counter()
        bad = []
        start = time.perf_counter()
        items = []
        if corpus:
            items += [
                ("corpus", n, fn, fac) for n, fn, fac in _programs_a.CASES + _programs_b.CASES
            ]
        items += [("fuzz", f"seed_{s}", D.program(s), None) for s in seeds]
        for kind, name, fn, factory in items:
            if kind == "corpus":
                o = check_corpus_case(fn, factory, make)
            else:
                compile_fn, counts = make()
                o = D.check(fn, compile_fn, counts, name=name)
            if o.status == "eager_error":
                continue
            c["programs"] += 1
            c[o.status] += 1
            c["graphs"] += o.graphs
            c["breaks"] += o.breaks
            c["recompiled"] += bool(o.recompiles)
            c["no graph"] += o.status == "correct" and o.graphs == 0
            if o.status != "correct":
                bad.append(f"{kind} {name}: {o.status}: {o.detail[:160]}")
            # fullgraph: does the whole program compile as one graph?
            try:
                if kind == "corpus":
                    of = check_corpus_case(fn, factory, make_full)
                else:
                    compile_fn, counts = make_full()
                    of = D.check(fn, compile_fn, counts, name=name + "_full", calls=1)
                c["fullgraph"] += of.status == "correct"
            except Exception:  # noqa: BLE001
                pass
        c["seconds"] = round(time.perf_counter() - start, 1)
        rows[label] = dict(c)
        details[label] = bad
    return rows, details


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500, help="random programs (N seeds)")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds FIRST..FIRST+N-1")
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="danlu only")
    ap.add_argument("--out", default=None, help="JSON file for counts and failures")
    args = ap.parse_args(argv)
    compilers = [("danlu", danlu_compiler(), danlu_compiler(fullgraph=True))]
    if not args.no_torch:
        compilers.append(("torch.compile", torch_compiler(), torch_compiler(fullgraph=True)))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows, details = run(compilers, seeds, not args.no_corpus)
    cols = [
        "programs",
        "correct",
        "wrong",
        "raised",
        "hung",
        "graphs",
        "breaks",
        "recompiled",
        "no graph",
        "fullgraph",
        "seconds",
    ]
    print("| compiler | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for label, c in rows.items():
        print(f"| {label} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
    for label, bad in details.items():
        print(f"\n{label}: {len(bad)} programs not correct")
        for line in bad[:40]:
            print("  " + line.replace("\n", " "))
    if args.out:
        pathlib.Path(args.out).write_text(
            json.dumps({"counts": rows, "failures": details}, indent=1)
        )


if __name__ == "__main__":
    main()
