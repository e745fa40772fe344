"""A few compiled steps of one suite model, checked against eager: the program that
`benchmarks/gpu_memcheck.sh` runs under `compute-sanitizer --tool memcheck`.

Each step draws fresh inputs, runs eager and the compiled copy from the same weights (bf16
autocast on CUDA), and compares the loss and every gradient (training) or the outputs
(inference) with `danlu.testing.same`. The last line of stdout is one JSON record:

    @@memcheck {"model": ..., "mode": ..., "status": "ok" | "mismatch" | "error", ...}

    python benchmarks/gpu_memcheck.py --model llama --mode train --steps 3          # small size
    python benchmarks/gpu_memcheck.py --model llama --mode train --full --steps 4   # issue size
    python benchmarks/gpu_memcheck.py --model llama --device cpu --steps 1          # smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import pathlib
import sys
import time
import traceback

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from gpu_models_zoo import MODELS, missing_dependency  # noqa: E402

PREFIX = "@@memcheck "


def _wide(t):
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


def _step(fn, module, inputs, train, amp):
    """Loss and gradients (training) or outputs (inference), as {name: tensor}."""
    if train:
        for p in module.parameters():
            p.grad = None
        with amp():
            loss = fn(*inputs)
        loss.backward()
        out = {"loss": _wide(loss.detach())}
        out.update(
            {f"grad:{n}": _wide(p.grad) for n, p in module.named_parameters() if p.grad is not None}
        )
        return out
    with torch.no_grad(), amp():
        out = fn(*inputs)
    leaves = out if isinstance(out, (list, tuple)) else [out]
    return {f"out{i}": _wide(t) for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)}


def _compare(ref, res, ref64, tol):
    """The suite's rule per tensor: allclose(rtol=atol=tol), else RMSE against the float64
    run at most 3x eager's RMSE (+ tol/10)."""
    from danlu.testing import same

    bad = []
    for name in sorted(set(ref) | set(res)):
        a, b = ref.get(name), res.get(name)
        r64 = ref64.get(name) if ref64 is not None else None
        if a is None or b is None:
            bad.append(f"{name}: {'missing' if b is None else 'unexpected'}")
        elif not torch.isfinite(b).all():
            bad.append(f"{name}: not finite")
        elif not same(a, b, r64, tol=tol, rtol=tol, atol=tol, cos_similarity=r64 is None):
            err = (a - b).abs().max().item()
            rmse = ""
            if r64 is not None:
                rmse = (
                    f", rmse vs fp64 {(b.double() - r64).pow(2).mean().sqrt().item():.3g}"
                    f" (eager {(a.double() - r64).pow(2).mean().sqrt().item():.3g})"
                )
            bad.append(f"{name}: max abs diff {err:.3g}{rmse}")
    return bad


def run(args) -> dict:
    rec = {"model": args.model, "mode": args.mode, "size": "full" if args.full else "small"}
    spec = MODELS[args.model]
    missing = missing_dependency(spec)
    if missing:
        return {**rec, "status": "skipped", "reason": missing}
    import danlu

    device = torch.device(args.device)
    train = args.mode == "train"
    torch.manual_seed(0)
    if args.layers is not None:
        module, make_inputs, info = spec.build(not args.full, layers=args.layers)
    else:
        module, make_inputs, info = spec.build(not args.full)
    module = module.to(device).train(train)
    compiled_module = copy.deepcopy(module)
    fn = danlu.compile(
        compiled_module, **({"mode": args.compile_mode} if args.compile_mode else {})
    )
    if device.type == "cuda":
        amp = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
        tol = 1e-2 if train else 1e-3
    else:
        amp = contextlib.nullcontext
        tol = 1e-3
    module64 = copy.deepcopy(module).double()
    gen = torch.Generator().manual_seed(1)
    steps = []
    start = time.perf_counter()
    for i in range(args.steps):
        inputs = tuple(t.to(device) for t in make_inputs(gen))
        in64 = tuple(t.double() if t.is_floating_point() else t for t in inputs)
        ref64 = _step(module64, module64, in64, train, contextlib.nullcontext)
        ref = _step(module, module, inputs, train, amp)
        res = _step(fn, compiled_module, inputs, train, amp)
        if device.type == "cuda":
            torch.cuda.synchronize()  # an asynchronous fault surfaces in this step
        bad = _compare(ref, res, {k: v.double() for k, v in ref64.items()}, tol)
        steps.append({"step": i, "mismatches": bad[:5], "n_mismatches": len(bad)})
        if train:  # the same update on both copies, so later steps start from the same weights
            with torch.no_grad():
                copies = (module.parameters(), compiled_module.parameters(), module64.parameters())
                for p, q, p64 in zip(*copies):
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-1e-3)
                        q.copy_(p)
                        p64.copy_(p)
    stats = danlu.CompileStats.current()
    rec.update(
        status="ok" if all(not s["n_mismatches"] for s in steps) else "mismatch",
        steps=steps,
        seconds=round(time.perf_counter() - start, 1),
        graphs=len(stats.graphs),
        graph_breaks=stats.graph_breaks,
        info=info,
    )
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--mode", default="train", choices=("train", "infer"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--full", action="store_true", help="the suite's full size, not the small one")
    ap.add_argument("--compile-mode", default=None, help="danlu.compile(mode=...)")
    ap.add_argument("--layers", type=int, default=None, help="language models: fewer blocks")
    args = ap.parse_args(argv)
    try:
        rec = run(args)
    except Exception as e:  # noqa: BLE001 - the record says what failed
        tb = traceback.format_exc()
        print(tb, file=sys.stderr)
        rec = {
            "model": args.model,
            "mode": args.mode,
            "status": "error",
            "reason": f"{type(e).__name__}: {' '.join(str(e).split())[:400]}",
            "where": tb.strip().splitlines()[-3:],
        }
    print(PREFIX + json.dumps(rec, default=str), flush=True)
    return 0 if rec["status"] in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
