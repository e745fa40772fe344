"""Which step of a build worker's job opens a CUDA context (device memory held by the process).

Run as a fresh process with CUDA_VISIBLE_DEVICES set to one device, as a build worker is:
    CUDA_VISIBLE_DEVICES=0 python benchmarks/probes/worker_context.py
"""

import os
import subprocess
import sys
import tempfile


def held(tag):
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout
    mine = [line for line in out.splitlines() if line.split(",")[0].strip() == str(os.getpid())]
    print(f"{tag:40s} {mine[0].split(',')[1].strip() if mine else 'no context'}", flush=True)


held("start")
import torch  # noqa: E402

held("import torch")
import triton.language as tl  # noqa: E402,F401
from triton.runtime import driver  # noqa: E402

d = driver.active
held("driver.active")
dev = d.get_current_device()
held("get_current_device")
tgt = d.get_current_target()
held(f"get_current_target {tgt}")
s = d.get_current_stream(dev)
held("get_current_stream")
folder = tempfile.mkdtemp()
path = os.path.join(folder, "k.py")
with open(path, "w") as f:
    f.write(
        "import triton\nimport triton.language as tl\n@triton.jit\n"
        "def k(a, b, n, XBLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
        "    tl.store(b + i, tl.load(a + i, i < n) + 1.0, i < n)\n"
    )
sys.path.insert(0, folder)
import k  # noqa: E402

compiled = k.k.warmup(torch.float32, torch.float32, 1024, grid=(1,), XBLOCK=128, num_warps=4)
held("fn.warmup")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "packages/inductor/src"))
from danlu_inductor.codegen.triton.precompile import prebuild_launcher  # noqa: E402

info = {}
prebuild_launcher(compiled, info)
held(f"prebuild_launcher {info}")
