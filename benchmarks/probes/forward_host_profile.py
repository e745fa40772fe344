"""Where a compiled training step's host time goes: which optional C++ extensions loaded, then
cProfile over a few forward+backward steps of one model under danlu (top functions by own
time and by cumulative time).

    python benchmarks/probes/forward_host_profile.py --model resnet50 --steps 10
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import os
import pstats
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gpu_models_zoo import MODELS  # noqa: E402
from train_step_host import step_parts  # noqa: E402


def extensions():
    for name in (
        "danlu_inductor._buffers",
        "danlu_inductor._replay_checks",
        "danlu_dynamo._tensor_checks",
        "danlu_dynamo._guard_checks",
    ):
        try:
            m = importlib.import_module(name)
            print(
                name,
                "loaded, built for",
                getattr(m, "TORCH_VERSION", "?"),
                "torch",
                torch.__version__,
            )
        except ImportError as e:
            print(name, "NOT loaded:", e)
    from danlu_inductor import runtime

    print("runtime.view:", runtime.view, "runtime.empty:", runtime.empty)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    extensions()
    device = torch.device(args.device)
    import danlu

    module, make_inputs, _ = MODELS[args.model].build(args.small)
    module = module.to(device).train()
    inputs = tuple(x.to(device) for x in make_inputs(torch.Generator().manual_seed(0)))
    fn = danlu.compile(module)
    params = [q for q in module.parameters() if q.requires_grad]
    forward, backward = step_parts(fn, params, inputs, device, torch.bfloat16)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        forward()
        backward()
    sync()
    for phase, profiled in (("forward", forward), ("backward", backward)):
        prof = cProfile.Profile()
        for _ in range(args.steps):
            for part in (forward, backward):
                if part is profiled:
                    prof.enable()
                part()
                prof.disable()
            sync()
        for key in ("tottime", "cumulative"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
            print(f"==== {phase} by {key} ({args.steps} steps)")
            print("\n".join(s.getvalue().splitlines()[4:]))


if __name__ == "__main__":
    main()
