"""Write the GPU path's generated wrappers and kernels of one suite model without a GPU.

The model is built at the suite's full sizes on the CPU; its graphs take the Triton path
(`DANLU_INDUCTOR_TRITON_ON_CPU=1`, kernels compiled for the interpreter) and the process ends
as soon as the first compiled graph is about to run, so nothing is executed: a training step's
forward and backward are both compiled by then. What it wrote lies under the debug folder,
`run_*/graph_*/{forward_0,backward_0,inference_0}.wrapper.py`, and a count of the generated
kernels' launches of each wrapper is printed.

    python benchmarks/dump_gpu_wrappers.py --model resnet50 --mode train --out /tmp/dump \
        [--options '{"group_input_kernels": true}'] [--channels-last]

`--channels-last` sets `DANLU_CONV_CHANNELS_LAST=1`, the layout the GPU picks for the vision
models' convolutions (the CPU's own choice differs).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys


def count_launches(path: str) -> int:
    """Lines that launch a generated kernel, in the wrapper's call body."""
    with open(path) as f:
        return sum(1 for line in f if re.match(r"^        danlu_", line))


def report(out: str) -> None:
    for path in sorted(glob.glob(os.path.join(out, "run_*", "graph_*", "*.wrapper.py"))):
        print(f"{os.path.relpath(path, out)}: {count_launches(path)} launches")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--out", required=True, help="the debug folder to write into")
    ap.add_argument("--options", default="{}", help="danlu.compile options, as JSON")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--small", action="store_true", help="the suite's small sizes")
    args = ap.parse_args()

    os.environ.update(
        DANLU_INDUCTOR_TRITON_ON_CPU="1",
        TRITON_INTERPRET="1",
        DANLU_GRAPH_CACHE="0",
        DANLU_DEBUG_DIR=args.out,
    )
    if args.channels_last:
        os.environ["DANLU_CONV_CHANNELS_LAST"] = "1"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    import torch
    from gpu_models_zoo import MODELS

    import danlu
    from danlu_inductor.pipeline import compiled

    def stop(self, *a, **k):  # compiled, nothing run: the wrappers are written
        sys.stdout.flush()
        report(args.out)
        os._exit(0)

    compiled.CompiledGraph.__call__ = stop

    module, make_inputs, info = MODELS[args.model].build(args.small)
    train = args.mode == "train"
    module.train(train)
    inputs = make_inputs(torch.Generator().manual_seed(0))
    fn = danlu.compile(module, options=json.loads(args.options))
    print(f"{args.model} {args.mode}: {info}", flush=True)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(train):
        out = fn(*inputs)
    if train:
        out.backward()
    report(args.out)  # reached only when nothing was compiled by the inductor


if __name__ == "__main__":
    main()
