"""cuBLAS on GPT-2's language-model head: which operand layouts need padding to 16 bytes.

passes/pad_matmul.py pads a 16-bit matmul when any of K, N (or M of a column-major left
operand) is not a multiple of 8 elements. The 2026-12-04 H200 profile of GPT-2 inference shows
torch.compile calling the head unpadded, with the weight as a transposed view (rows of 768,
aligned) and only the result's rows (50257) unaligned, in a fast kernel (0.43 ms), while
danlu's padding costs two extra copies (0.23 + 0.22 ms). This times each layout alone, to
decide whether an unaligned result alone needs padding.

    python benchmarks/gpu_matmul_alignment.py
"""

from __future__ import annotations

import torch


def timed(f, n=30) -> float:
    for _ in range(5):
        f()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def main():
    torch.manual_seed(0)
    dev, bf16 = "cuda", torch.bfloat16
    x = torch.randn(4096, 768, device=dev, dtype=bf16)
    w = torch.randn(50257, 768, device=dev, dtype=bf16)
    w_t = w.t().contiguous()  # (768, 50257): rows of 50257, unaligned
    w_pad = torch.nn.functional.pad(w, (0, 0, 0, 7))  # (50264, 768)
    g = torch.randn(4096, 50257, device=dev, dtype=bf16)
    g_pad = torch.nn.functional.pad(g, (0, 7))
    # the same values in a buffer whose rows are padded to 50264 elements (a strided view):
    # the layout a stride-padding compiler gives the gradient, with K or M still 50257
    g_strided = g_pad[:, :50257]
    out_strided = torch.empty(4096, 50264, device=dev, dtype=bf16)[:, :50257]
    cases = {
        "forward x @ w.t() (weight rows aligned, result rows 50257)": lambda: x @ w.t(),
        "forward x @ w_t (weight rows of 50257)": lambda: x @ w_t,
        "forward padded, result rows 50264": lambda: x @ w_pad.t(),
        "forward padded, then the slice copied out": lambda: (x @ w_pad.t())[:, :50257].clone(),
        "forward x @ w.t() into a result with rows strided 50264 (out=)": lambda: torch.mm(
            x, w.t(), out=out_strided
        ),
        "backward g @ w (left rows of 50257)": lambda: g @ w,
        "backward g @ w, g's rows strided 50264 (K 50257)": lambda: g_strided @ w,
        "backward padded g @ w": lambda: g_pad @ w_pad,
        "backward g.t() @ x (column-major left, 50257)": lambda: g.t() @ x,
        "backward padded g.t() @ x": lambda: g_pad.t() @ x,
        "backward g.t() @ x, g's rows strided 50264 (M 50257)": lambda: g_strided.t() @ x,
    }
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; ms per call")
    ref = x @ w.t()
    torch.mm(x, w.t(), out=out_strided)
    print("out= kept its strides:", out_strided.stride(), "equal:", torch.equal(ref, out_strided))
    for name, f in cases.items():
        print(f"{timed(f):8.3f}  {name}", flush=True)


if __name__ == "__main__":
    main()
