"""``python -m danlu_primtorch.coverage [--sweep] [--results PATH] [--status S] [--markdown]``

Without ``--sweep`` the pass rates come from the results file a previous sweep wrote (default
``~/.cache/danlu/primtorch_coverage.json``, or ``$DANLU_CACHE_DIR``). ``--sweep`` runs the OpInfo
sweep first (needs the package's ``test`` extra: torch's OpInfo database wants ``expecttest``).
"""

from __future__ import annotations

import argparse
import sys
import warnings

from danlu_primtorch.coverage import report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m danlu_primtorch.coverage")
    ap.add_argument("--sweep", action="store_true", help="run the OpInfo sweep and save results")
    ap.add_argument("--samples", type=int, default=4, help="samples per OpInfo and dtype (sweep)")
    ap.add_argument("--max-checks", type=int, default=60, help="checks per overload (sweep)")
    ap.add_argument("--results", default=str(report.DEFAULT_RESULTS), help="results file")
    ap.add_argument("--status", help="only rows with this status (e.g. 'not handled')")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--summary", action="store_true", help="print the summary only")
    args = ap.parse_args(argv)

    if args.sweep:
        from danlu_primtorch.coverage.sweep import sweep
        from danlu_primtorch.decompositions import decomposition_table

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = sweep(
                decomposition_table("canonical"),
                samples_per_dtype=args.samples,
                max_checks_per_op=args.max_checks,
            )
        path = report.save(result, args.results)
        print(f"sweep: {len(result.checks)} checks in {result.seconds:.0f}s, saved to {path}")
    results = report.load(args.results)
    if results is None:
        print(f"(no sweep results at {args.results}: run with --sweep for OpInfo pass rates)")
    if not args.summary:
        rows = report.table_rows(results)
        if args.status:
            rows = [r for r in rows if r[1] == args.status]
        if args.markdown:
            print("| op | status | family | OpInfo pass/checks |\n|---|---|---|---|")
            for r in rows:
                print("| " + " | ".join(r) + " |")
        else:
            w = max((len(r[0]) for r in rows), default=10)
            for r in rows:
                print(f"{r[0]:<{w}}  {r[1]:<20}  {r[2]:<12}  {r[3]}")
    print()
    for line in report.summary(results):
        print(f"- {line}" if args.markdown else line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
