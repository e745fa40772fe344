"""Compile time of a first training step: cold, warm in the same process, warm in a new
process, and from an imported cache bundle; danlu and torch.compile in one run.

    python benchmarks/compile_time.py                 # CPU, GPT-2 style 4x128, batch 4x64
    python benchmarks/compile_time.py --device cuda --layers 12 --width 768

Each measurement runs in a fresh Python process (a subprocess of this script) so imports and
in-memory caches do not carry over, except "warm, same process" (after `danlu.reset()` /
`torch._dynamo.reset()`). "First step" is the wall time of the first compiled forward +
backward, minus nothing; the eager step time is printed for scale. Caches live in a temporary
directory per compiler: "cold" starts it empty, "warm (new process)" reuses it, "imported"
starts from an empty directory plus the bundle the cold run exported
(`danlu.save_cache_artifacts` / `torch.compiler.save_cache_artifacts`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    args = json.loads(sys.argv[1])
    t0 = time.perf_counter()
    import torch, transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=args["layers"], n_embd=args["width"], n_head=4,
        vocab_size=1024, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg).to(args["device"])
    ids = torch.randint(0, 1024, (4, 64), device=args["device"])
    def sync():
        if args["device"] == "cuda":
            torch.cuda.synchronize()
    def step(m):
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        sync()
        return loss.detach()
    def grads_and_clear():
        g = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad(set_to_none=True)
        return g
    # the reference: eager's loss and gradients of the same step (a graph loaded from the
    # cache must compute what a fresh compile computes)
    ref_loss = step(model)
    ref_grads = grads_and_clear()
    def error(loss):
        grads = grads_and_clear()
        err = [(loss - ref_loss).abs().item()]
        err += [((a - b).abs().max() / (b.abs().max() + 1e-6)).item() for a, b in zip(grads, ref_grads)]
        return max(err) if len(grads) == len(ref_grads) else float("inf")
    if args["compiler"] == "danlu":
        import danlu
        if args.get("import_bundle"):
            danlu.load_cache_artifacts(args["import_bundle"])
        compiled = danlu.compile(model)
        reset = danlu.reset
    else:
        if args.get("import_bundle"):
            with open(args["import_bundle"], "rb") as f:
                torch.compiler.load_cache_artifacts(f.read())
        compiled = torch.compile(model)
        reset = torch._dynamo.reset
    imported = time.perf_counter() - t0
    t = time.perf_counter(); loss = step(compiled); first = time.perf_counter() - t
    out = {"first_step_s": first, "import_s": imported, "max_error": error(loss)}
    if args.get("same_process"):
        reset()
        compiled = danlu.compile(model) if args["compiler"] == "danlu" else torch.compile(model)
        t = time.perf_counter(); loss = step(compiled); out["warm_same_process_s"] = time.perf_counter() - t
        out["max_error"] = max(out["max_error"], error(loss))
    t = time.perf_counter(); step(model); out["eager_step_s"] = time.perf_counter() - t
    if args.get("export_bundle"):
        if args["compiler"] == "danlu":
            danlu.save_cache_artifacts(args["export_bundle"])
        else:
            data = torch.compiler.save_cache_artifacts()
            with open(args["export_bundle"], "wb") as f:
                f.write(data[0] if data else b"")
    print("@@result " + json.dumps(out))
    """
)


def run_child(args: dict, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("@@result "):
            return json.loads(line[len("@@result ") :])
    raise RuntimeError(f"child failed:\n{proc.stderr[-3000:]}")


def measure(compiler: str, base: dict) -> dict:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as fresh:
        bundle = os.path.join(cache, "bundle.bin")

        def env_for(root):
            if compiler == "danlu":
                return {"DANLU_CACHE_DIR": root, "TRITON_CACHE_DIR": os.path.join(root, "triton")}
            return {
                "TORCHINDUCTOR_CACHE_DIR": root,
                "TRITON_CACHE_DIR": os.path.join(root, "triton"),
            }

        args = {**base, "compiler": compiler}
        cold = run_child({**args, "same_process": True, "export_bundle": bundle}, env_for(cache))
        warm = run_child(args, env_for(cache))
        imported = run_child({**args, "import_bundle": bundle}, env_for(fresh))
    return {
        # largest difference from eager over the four first steps: loss (absolute) and each
        # gradient (max abs difference over the gradient's max abs value)
        "max error vs eager": max(r["max_error"] for r in (cold, warm, imported)),
        "cold": cold["first_step_s"],
        "warm, same process": cold["warm_same_process_s"],
        "warm, new process": warm["first_step_s"],
        "imported bundle, new process": imported["first_step_s"],
        "eager step": cold["eager_step_s"],
        "import + build": cold["import_s"],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--compilers", default="danlu,torch.compile")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    base = {"device": args.device, "layers": args.layers, "width": args.width}
    rows = {c: measure(c, base) for c in args.compilers.split(",")}
    cols = list(next(iter(rows.values())))
    print(f"GPT-2 style {args.layers}x{args.width}, batch 4x64, one training step, {args.device}")
    print("| compiler | " + " | ".join(c if "error" in c else f"{c} s" for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for c, r in rows.items():
        print(
            f"| {c} | "
            + " | ".join(f"{r[k]:.2g}" if "error" in k else f"{r[k]:.2f}" for k in cols)
            + " |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": base, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
