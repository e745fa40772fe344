"""danlu.compile on a GPT-2-like block, forward and backward: accuracy against eager and
step time against eager and torch.compile.

    python triton_gpu_check.py OUT.json [--device cuda] [--dim 768 --heads 12 --batch 8 --seq 256]

For each of fp32 and bf16 autocast: eager, danlu.compile (default and mode="reduce-overhead")
and torch.compile (the reference) each run a training step (forward, loss, backward). Outputs
and gradients are compared with a float64 run (relative L2 error; eager's own error is the
yardstick); timings are medians of CUDA-event-timed steps after warm-up. With
``--device cpu`` (and DANLU_INDUCTOR_TRITON_ON_CPU=1 TRITON_INTERPRET=1) it checks accuracy
only, at a small size: the Triton path of forward and backward without a GPU.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(__file__))

from models import TransformerBlock  # noqa: E402


def rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def step(model, x, dtype):
    ctx = (
        torch.autocast(x.device.type, dtype=torch.bfloat16)
        if dtype == "bf16"
        else torch.autocast(x.device.type, enabled=False)
    )
    for p in model.parameters():
        p.grad = None
    with ctx:
        out = model(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    return out, [p.grad for p in model.parameters()]


def time_steps(fn, device, n=20):
    if device.type != "cuda":
        return None
    times = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return round(statistics.median(times), 4)


def profile_step(model, x, dtype):
    """The GPU kernels of three steps, by total time (a table, as text)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step(model, x, dtype)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(model, x, dtype)
        torch.cuda.synchronize()
    return prof.key_averages().table(
        sort_by="cuda_time_total", row_limit=18, max_name_column_width=60
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--variants", default="danlu,danlu-reduce-overhead,torch.compile")
    ap.add_argument("--profile", default="", help="dtype whose danlu step is profiled")
    a = ap.parse_args()
    device = torch.device(a.device)
    import danlu
    import danlu_inductor

    reports = []  # every graph danlu's inductor compiles (reports update after capture)
    original = danlu_inductor.compile_fx

    def recording_compile_fx(gm, example_inputs, options=None):
        compiled = original(gm, example_inputs, options=options)
        reports.append(compiled.report)
        return compiled

    danlu_inductor.compile_fx = recording_compile_fx

    torch.manual_seed(0)
    base = TransformerBlock(a.dim, a.heads, ctx=a.seq).to(device)
    x = torch.randn(a.batch, a.seq, a.dim, device=device)
    results = {"config": vars(a), "torch": torch.__version__}
    try:
        import triton

        results["triton"] = triton.__version__
    except ImportError:
        pass
    if device.type == "cuda":
        results["gpu"] = torch.cuda.get_device_name()
    ref64 = copy.deepcopy(base).double()
    out64, grads64 = step(ref64, x.double(), "fp32")
    for dtype in a.dtypes.split(","):
        eager = copy.deepcopy(base)
        out_e, grads_e = step(eager, x, dtype)
        row = {
            "eager_ms": time_steps(lambda eager=eager, dtype=dtype: step(eager, x, dtype), device)
        }
        ref_out, ref_grads = out64, grads64  # both dtypes: errors against float64
        row["eager_out_err"] = rel_err(out_e, ref_out)
        row["eager_grad_err"] = max(rel_err(g, r) for g, r in zip(grads_e, ref_grads))
        for variant in a.variants.split(","):
            key = variant
            reports.clear()
            try:
                model = copy.deepcopy(base)
                t0 = time.perf_counter()
                if variant == "danlu":
                    compiled = danlu.compile(model)
                elif variant == "danlu-reduce-overhead":
                    compiled = danlu.compile(model, mode="reduce-overhead")
                elif variant == "torch.compile":
                    if device.type != "cuda":
                        continue
                    compiled = torch.compile(model)
                else:
                    raise ValueError(variant)
                out_c, grads_c = step(compiled, x, dtype)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                first_s = time.perf_counter() - t0
                out_c, grads_c = step(compiled, x, dtype)  # second call: captured graphs replay
                out_c, grads_c = step(compiled, x, dtype)
                row[f"{key}_first_step_s"] = round(first_s, 2)
                row[f"{key}_out_err"] = rel_err(out_c, ref_out)
                row[f"{key}_grad_err"] = max(rel_err(g, r) for g, r in zip(grads_c, ref_grads))
                row[f"{key}_ms"] = time_steps(
                    lambda compiled=compiled, dtype=dtype: step(compiled, x, dtype), device
                )
            except Exception:
                row[f"{key}_error"] = traceback.format_exc()[-2500:]
            if variant.startswith("danlu"):
                row[f"{key}_graphs"] = [
                    {
                        k: r.get(k)
                        for k in (
                            "backend",
                            "kernels",
                            "extern_calls",
                            "fallback_ops",
                            "triton_fallbacks",
                            "fallback_reason",
                            "cudagraphs",
                            "compile_s",
                        )
                    }
                    for r in reports
                ]
                reports.clear()
        if dtype == a.profile and device.type == "cuda":
            row["danlu_profile"] = profile_step(danlu.compile(copy.deepcopy(base)), x, dtype)
        results[dtype] = row
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1, default=str)
    for dtype in a.dtypes.split(","):
        row = results.get(dtype, {})
        skip = ("_error", "_graphs", "_profile")
        print(dtype, {k: v for k, v in row.items() if not k.endswith(skip)})
        for k, v in row.items():
            if k.endswith("_error"):
                print(k, v[-800:])
            if k.endswith("_profile"):
                print(v)


if __name__ == "__main__":
    main()
