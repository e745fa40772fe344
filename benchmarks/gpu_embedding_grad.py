"""The small-table embedding gradient on CUDA (the packages installed): the two kernel cases of `packages/inductor/tests/triton_cases.py`, then T5's
relative-position shape (32 table rows, 8 heads, 512 x 512 positions, three layers' gradients
summed into it) as generated kernels against ATen's `embedding_dense_backward`.

    python benchmarks/gpu_embedding_grad.py
"""

import os
import sys

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "packages", "inductor", "tests"))
sys.path.insert(0, _HERE)
import triton_cases  # noqa: E402
from cuda_timing import per_call_us  # noqa: E402


def t5_bias_gradient(g1, g2, g3, buckets):
    grad = (g1 + g2 + g3).permute(1, 2, 0)  # [q, k, heads]
    return torch.ops.aten.embedding_dense_backward(grad, buckets, 32, -1, False)


def main():
    for name in ["embedding_grad_small_table", "embedding_grad_padding_int32"]:
        print(name, triton_cases.run_cuda(name, True), flush=True)
    grads = [torch.randn(8, 512, 512, device="cuda") for _ in range(3)]
    buckets = torch.randint(0, 32, (512, 512), device="cuda")
    compiled = triton_cases._compile(t5_bias_gradient, [*grads, buckets])
    got = compiled(*grads, buckets)
    got = got[0] if isinstance(got, (list, tuple)) else got
    ref = t5_bias_gradient(*grads, buckets)
    print(f"T5 shape: max abs err {(got - ref).abs().max().item():.3g}")
    danlu_us = per_call_us(lambda *a: compiled(*a), *grads, buckets)
    eager_us = per_call_us(t5_bias_gradient, *grads, buckets)
    print(f"T5 shape: danlu {danlu_us:.1f} us a call, eager {eager_us:.1f} us")


if __name__ == "__main__":
    main()
