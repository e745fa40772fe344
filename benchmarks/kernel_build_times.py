"""Build times of generated Triton kernels for sm_90, on any machine (no GPU needed).

Reads a kernels file a debug directory holds (``DANLU_DEBUG_DIR=...``: ``forward_0.kernels.py``,
``backward_0.kernels.py``), builds each kernel ahead of time for ``sm_90`` with each given
config (XBLOCK, RBLOCK, warps; pointwise kernels take XBLOCK only), one build after another,
and prints the seconds each took, longest first. A graph's Triton compile on the GPU machine
runs these builds in parallel workers, so its wall time is about the longest build.

    DANLU_INDUCTOR_TRITON_ON_CPU=1 TRITON_INTERPRET=1 DANLU_DEBUG_DIR=/tmp/dbg python ...
    python benchmarks/kernel_build_times.py /tmp/dbg/run_*/graph_000/backward_0.kernels.py \\
        [--kernels a,b] [--configs '[[4, 1024, 8], [1, 1024, 4]]'] [--top 10]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time


def build_times(path, names=None, configs=((4, 1024, 8),)):
    """[(seconds, kernel, kind, config)] for every kernel of the file (or ``names``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("danlu_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = names or [n for n in dir(mod) if hasattr(getattr(mod, n), "danlu_meta")]
    out = []
    for name in names:
        fn = getattr(mod, name)
        meta = fn.danlu_meta
        sig = dict(meta["signature"])
        sizes = {"xnumel": meta["xnumel"], "rnumel": meta["rnumel"]}
        attrs = {  # what a launch on aligned tensors specializes (as the JIT does)
            (i,): [["tt.divisibility", 16]]
            for i, (arg, kind) in enumerate(sig.items())
            if kind.startswith("*") or (isinstance(sizes.get(arg), int) and sizes[arg] % 16 == 0)
        }
        for xblock, rblock, warps in configs:
            consts = {"XBLOCK": xblock} | ({"RBLOCK": rblock} if "RBLOCK" in sig else {})
            start = time.perf_counter()
            triton.compile(
                ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                target=GPUTarget("cuda", 90, 32),
                options={"num_warps": warps},
            )
            seconds = time.perf_counter() - start
            out.append((seconds, name, meta["kind"], (xblock, rblock, warps)))
    return sorted(out, reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels_file")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default all)")
    ap.add_argument("--configs", default="[[4, 1024, 8]]", help="JSON [[XBLOCK, RBLOCK, warps]]")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="danlu-build-times-"))
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    names = [n for n in args.kernels.split(",") if n] or None
    rows = build_times(args.kernels_file, names, [tuple(c) for c in json.loads(args.configs)])
    total = sum(r[0] for r in rows)
    print(
        f"{len(rows)} builds, {total:.1f} s in all, longest {rows[0][0]:.1f} s" if rows else "none"
    )
    for seconds, name, kind, cfg in rows[: args.top]:
        print(
            f"{seconds:6.2f} s  {name} ({kind}, XBLOCK {cfg[0]}, RBLOCK {cfg[1]}, {cfg[2]} warps)"
        )


if __name__ == "__main__":
    main()
