"""Graph breaks of a suite model, with reasons, as the GPU suite runs it (bf16 autocast).

    python benchmarks/explain_model.py gpt2 bert --device cuda --mode train

Runs ``danlu.explain`` over one step of each model (the small size unless ``--full``) and
prints the graph count, the breaks with their reasons and the user's file:line. Nothing is
compiled. Use it when the suite reports more graphs than it should.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_models_zoo import MODELS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", choices=sorted(MODELS))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mode", default="train", choices=("train", "infer"))
    ap.add_argument("--full", action="store_true", help="the suite's size, not the small one")
    ap.add_argument("--no-amp", action="store_true", help="no bf16 autocast")
    args = ap.parse_args()
    import danlu

    for name in args.models:
        module, make_inputs, _ = MODELS[name].build(not args.full)
        module = module.to(args.device).train(args.mode == "train")
        inputs = [x.to(args.device) for x in make_inputs(torch.Generator().manual_seed(0))]
        amp = (
            contextlib.nullcontext
            if args.no_amp
            else lambda: torch.autocast(args.device, dtype=torch.bfloat16)
        )

        def step(*a, module=module, amp=amp):
            with torch.no_grad() if args.mode == "infer" else contextlib.nullcontext(), amp():
                return module(*a)

        text = str(danlu.explain(step)(*inputs))
        print(f"===== {name} {args.mode} on {args.device}", flush=True)
        # the op lists and guards are long: keep the counts and the breaks
        keep = [ln for ln in text.split("\nGuards:")[0].splitlines() if not ln.startswith("    ")]
        print("\n".join(keep), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
