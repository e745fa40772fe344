"""What a cache hit's guard check costs on the GPU suite's models (built at full size on the
CPU; the check reads only Python objects and tensor metadata, so no GPU is needed).

For each model: capture its inference forward once (backend "eager"), then time the frame's
check function, called as the frame hook calls it, on the same arguments.

    python benchmarks/dynamo_guard_cost.py --models t5,gpt2,bert
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def record_checks() -> list:
    """From now on, each frame check capture compiles is also appended to the returned list,
    without its "is this capture context active" test, to be called directly."""
    from danlu_dynamo.capture import guard_codegen

    checks = []
    compile_for_frame = guard_codegen.GuardSet.compile_for_frame

    def keep(self, f_globals, freevars, first_check=None, values=None):
        checks.append(compile_for_frame(self, f_globals, freevars, None, values))
        return compile_for_frame(self, f_globals, freevars, first_check, values)

    guard_codegen.GuardSet.compile_for_frame = keep
    return checks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="t5,gpt2,bert")
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()

    from gpu_models_zoo import MODELS

    import danlu_dynamo

    checks = record_checks()
    for name in args.models.split(","):
        checks.clear()
        module, make_inputs, _ = MODELS[name].build(False)
        module.eval()
        inputs = make_inputs(torch.Generator().manual_seed(0))
        with torch.no_grad():
            danlu_dynamo.optimize("eager")(module)(*inputs)
            check = checks[0]
            names = [n for n in inspect.signature(type(module).forward).parameters if n != "self"]
            frame_locals = {"self": module, **dict(zip(names, inputs))}
            if not check(frame_locals):
                raise SystemExit(f"{name}: the check fails: {check.failure_reason(frame_locals)}")
            us = {}
            # the check, and where it batches guards (``attrs_are``/``tensors_are``) the same
            # guards one by one (what it falls back to)
            for kind, fn in (("check", check), ("unbatched", getattr(check, "full", None))):
                if fn is None:
                    continue
                assert fn(frame_locals)
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(frame_locals)
                us[kind] = (time.perf_counter() - start) / args.calls * 1e6
        times = ", ".join(f"{k} {v:.0f} us" for k, v in us.items())
        print(f"{name}: {len(check.guards.splitlines())} guards, {times}")


if __name__ == "__main__":
    main()
