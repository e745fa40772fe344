"""Vocabulary-sized softmax rows on the GPU: log-softmax, softmax and logsumexp over a language
model's logits, eager against torch.compile and danlu.compile (inference graphs: the kernels
of one forward), microseconds a call from CUDA events, every result checked against eager.

    python benchmarks/gpu_softmax_rows.py
"""

import torch
from cuda_timing import per_call_us

import danlu

CASES = {
    "log_softmax bf16 4096x50257": (lambda x: torch.log_softmax(x, -1), (4096, 50257)),
    "log_softmax of float(bf16) 8192x32000": (
        lambda x: torch.log_softmax(x.float(), -1),
        (8192, 32000),
    ),
    "softmax bf16 4096x50257": (lambda x: torch.softmax(x, -1), (4096, 50257)),
    "logsumexp of float(bf16) 8192x32000": (
        lambda x: torch.logsumexp(x.float(), -1),
        (8192, 32000),
    ),
}


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    with torch.no_grad():
        for name, (fn, shape) in CASES.items():
            x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 4
            ref = fn(x)
            row = [name]
            for label, f in (
                ("eager", fn),
                ("torch.compile", torch.compile(fn)),
                ("danlu", danlu.compile(fn)),
            ):
                out = f(x)
                torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
                row.append(f"{label} {per_call_us(f, x):.1f} us")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
