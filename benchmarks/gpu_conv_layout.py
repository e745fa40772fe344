"""GPU A/B of the convolution layout choice (danlu_inductor/lowering/convolution.py) on one
suite model and mode: eager and danlu.compile variants side by side in one process, bf16
autocast, CUDA-event medians of 15 interleaved steps, then one profiled step per danlu variant
(kernel time by category). Prints one ``@@clbench {json}`` line.

    python benchmarks/gpu_conv_layout.py resnet50 train danlu_nocl danlu_cl [tc]

Variants: ``danlu`` (the default choice), ``danlu_cl`` (DANLU_CONV_CHANNELS_LAST=1),
``danlu_nocl`` (=0), ``tc`` (torch.compile). The setting is read when a graph compiles, so
each variant compiles with its own. Written without a ``__main__`` guard on purpose: danlu's
parallel Triton compile must not re-run a user's unguarded script in its workers.
"""

import copy
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from gpu_models_zoo import MODELS  # noqa: E402

name, mode = sys.argv[1], sys.argv[2]
train = mode == "train"
torch.manual_seed(0)
module, make_inputs, info = MODELS[name].build(False)
module = module.cuda().train(train)
gen = torch.Generator().manual_seed(1)
inputs = tuple(t.cuda() for t in make_inputs(gen))
if not train:
    module = module.eval()
import danlu  # noqa: E402


def step(fn, m):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        if train:
            for p in m.parameters():
                p.grad = None
            loss = fn(*inputs)
            loss.backward()
            return loss.detach().float()
        with torch.no_grad():
            return fn(*inputs).float()


variants = {"eager": (module, module)}
compile_s = {}
VARIANTS = {"danlu": None, "danlu_cl": "1", "danlu_nocl": "0", "tc": None}
chosen = [a for a in sys.argv[3:] if a in VARIANTS] or ["danlu", "danlu_cl"]
for tag, env in [(t, VARIANTS[t]) for t in chosen]:
    m = copy.deepcopy(module)
    if env is None:
        os.environ.pop("DANLU_CONV_CHANNELS_LAST", None)
    else:
        os.environ["DANLU_CONV_CHANNELS_LAST"] = env
    fn = torch.compile(m) if tag == "tc" else danlu.compile(m)
    t0 = time.perf_counter()
    step(fn, m)
    torch.cuda.synchronize()
    compile_s[tag] = round(time.perf_counter() - t0, 1)
    variants[tag] = (fn, m)
    print(tag, "first step", compile_s[tag], "s", flush=True)
os.environ.pop("DANLU_CONV_CHANNELS_LAST", None)
ref = step(*variants["eager"])
err = {k: (step(*v) - ref).abs().max().item() for k, v in variants.items() if k != "eager"}
for _ in range(3):
    for v in variants.values():
        step(*v)
times = {k: [] for k in variants}
for _ in range(15):
    for k, v in variants.items():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step(*v)
        e.record()
        torch.cuda.synchronize()
        times[k].append(s.elapsed_time(e))
med = {k: round(statistics.median(v), 3) for k, v in times.items()}
rec = {
    "model": name,
    "mode": mode,
    "ms": med,
    "speedup": {k: round(med["eager"] / v, 3) for k, v in med.items()},
    "first_step_s": compile_s,
    "max_err_vs_eager": err,
    "info": info,
}
# kernel time by category for the two danlu variants (one profiled step each)
from torch.profiler import ProfilerActivity, profile  # noqa: E402

for k in [t for t in chosen if t != "tc"]:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*variants[k])
        torch.cuda.synchronize()
    cats = {}
    for ev in prof.key_averages():
        n = ev.key.lower()
        c = (
            "conv"
            if any(x in n for x in ("conv", "cudnn", "implicit", "sm90_xmma", "xmma"))
            else "copy/layout"
            if any(x in n for x in ("nchwtonhwc", "nhwctonchw", "copy", "transpose"))
            else "gemm"
            if any(x in n for x in ("gemm", "cutlass", "nvjet"))
            else "triton"
            if n.startswith("triton") or "kernel" in n
            else "other"
        )
        cats[c] = cats.get(c, 0) + ev.device_time_total / 1e3
    rec.setdefault("profile_ms", {})[k] = {c: round(v, 3) for c, v in sorted(cats.items())}
    rec.setdefault("top", {})[k] = [
        (ev.key[:70], round(ev.device_time_total / 1e3, 3))
        for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:6]
    ]
print("@@clbench " + json.dumps(rec), flush=True)
