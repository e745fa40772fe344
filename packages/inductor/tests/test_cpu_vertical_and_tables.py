"""Two C++ kernel shapes for channels-last CNN graphs (codegen/cpp/vertical.py and the
per-index tables of codegen/cpp/kernel.py), checked against eager with float64 references on
fresh inputs, and by what the generated source looks like."""

from __future__ import annotations

import pytest
import torch
from helpers import check_same


def _cl(*size, dtype=torch.float32):
    return torch.randn(*size, dtype=dtype).to(memory_format=torch.channels_last)


def _bn_relu_mean(x, mean, var, w, b):
    # a squeeze-excite block after an inference batch norm: the normalized value is stored
    # (channels-last) and reduced over H, W per (batch, channel)
    y = torch.relu(
        (x - mean[:, None, None]) / torch.sqrt(var[:, None, None] + 1e-3) * w[:, None, None]
        + b[:, None, None]
    )
    return y, y.mean((2, 3))


def _stats(c):
    return torch.randn(c), torch.rand(c) + 0.5, torch.randn(c), torch.randn(c)


@pytest.mark.parametrize("shape", [(2, 16, 56, 56), (3, 40, 7, 9), (2, 576, 7, 7)])
def test_channels_last_spatial_mean_is_vertical(shape):
    x = _cl(*shape)
    args = (x, *_stats(shape[1]))
    compiled = check_same(_bn_relu_mean, *args, rtol=1e-5, atol=1e-5)
    y, m = compiled(*args)
    ref = _bn_relu_mean(*(a.double() for a in args))[1]
    torch.testing.assert_close(m.double(), ref, rtol=1e-5, atol=1e-6)
    src = compiled.kernel_source
    # one accumulator per channel, updated in a simd loop over channels inside the r loop
    assert "acc" in src and "_v[" in src and "omp simd reduction" not in src, src


def test_vertical_reductions_of_every_kind():
    def f(x):
        return (
            x.amax((2, 3)),
            x.amin((2, 3)),
            x.sum((2, 3)),
            x.var((2, 3)),
            (x * 0.1).exp().flatten(2).prod(-1),
            x.flatten(2).argmax(-1),
        )

    x = _cl(2, 24, 5, 6)
    x[0, 3, 1, 2] = float("nan")  # a NaN row: max/min/sum/var return NaN for it
    check_same(f, x, rtol=1e-4, atol=1e-5)


def test_row_reductions_stay_row_wise():
    # contiguous (NCHW) rows: the reduction loop already reads consecutive addresses
    def f(x):
        return x.sum((2, 3))

    x = torch.randn(2, 16, 8, 8)
    compiled = check_same(f, x)
    assert "omp simd reduction(+:" in compiled.kernel_source


def test_non_contiguous_channels_last_view():
    # a sliced channels-last input: strides that are not a dense layout's
    base = _cl(2, 32, 10, 12)
    x = base[:, ::2, 1:9, ::3]

    def f(x):
        return torch.relu(x + 1).mean((2, 3)) * 2

    check_same(f, x, rtol=1e-5, atol=1e-6)


def test_per_channel_arithmetic_is_computed_once_into_a_table():
    def f(x, mean, var, w, b):
        return _bn_relu_mean(x, mean, var, w, b)[0] * 3

    x = _cl(2, 72, 14, 14)
    args = (x, *_stats(72))
    compiled = check_same(f, *args, rtol=1e-5, atol=1e-5)
    src = compiled.kernel_source
    # 1/sqrt(var + eps) once per channel, before the threads' loop
    assert "tab_tmp" in src, src
    pre, _, loop = src.partition("#pragma omp parallel for")
    assert "std::sqrt" in pre and "std::sqrt" not in loop, src


def test_tables_in_a_bf16_kernel_and_with_an_integer_channel_value():
    def f(x, scale, shift):
        k = (shift * 3) % 5  # integer arithmetic per channel
        return (x * scale.exp()[:, None, None] + k[:, None, None]).to(torch.bfloat16)

    x = _cl(2, 24, 6, 6)
    scale = torch.randn(24)
    shift = torch.randint(-7, 7, (24,))
    check_same(f, x, scale, shift, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("cols", [256, 200, 40])
def test_column_sums_are_vertical_in_chunks(cols):
    # a bias gradient: rows summed per column, the columns contiguous; with no other kept
    # dim the threads take chunks of the columns (200: a last chunk of 8)
    def f(g, x):
        return g.sum(0), (g * x).sum(0)

    g, x = torch.randn(1024, cols), torch.randn(1024, cols)
    compiled = check_same(f, g, x, rtol=1e-5, atol=1e-4)
    ref = [t.double() for t in (g, x)]
    got = compiled(g, x)
    torch.testing.assert_close(got[0].double(), ref[0].sum(0), rtol=1e-5, atol=1e-4)
    src = compiled.kernel_source
    assert "_v[" in src and "omp simd reduction" not in src, src
    assert ("dl_chunk" in src) == (cols >= 128), src


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_vertical_kernels_across_dtypes_and_layouts(dtype):
    # reductions over the leading dims of values whose innermost dim is kept, from
    # channels-last, transposed and sliced inputs, with integer and bool reductions beside
    def f(x, m):
        y = torch.nn.functional.silu(x) * 1.5
        return (
            y.sum((2, 3)),
            y.amax((0, 2)),
            (x > 0).any(2),
            (m * 3).sum(0),
            y.mean((0, 2, 3), keepdim=True),
        )

    base = torch.randn(3, 33, 9, 10, dtype=torch.float32)
    for x in (
        base.to(memory_format=torch.channels_last),
        base.transpose(1, 3),
        base.to(memory_format=torch.channels_last)[:, 1:30, ::2],
    ):
        x = x.to(dtype)
        m = torch.randint(-5, 5, (64, 150))
        tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
        check_same(f, x, m, **tol)


def test_layer_norm_weight_gradients_with_per_row_statistics_are_vertical():
    """A layer norm's weight and bias gradients (ConvNeXt's and ViT's blocks): per-column
    sums of ``g * xhat`` and ``g`` where ``xhat`` reads each row's mean and rstd. Those loads
    are the same for every column, so they do not keep the kernel row-wise; the sums match
    float64 eager."""

    def f(g, x, mean, rstd):
        return (g * ((x - mean) * rstd)).sum(0), g.sum(0)

    rows, cols = 2 * 28 * 28, 80
    g, x = torch.randn(rows, cols), torch.randn(rows, cols)
    mean, rstd = torch.randn(rows, 1), torch.rand(rows, 1) + 0.5
    compiled = check_same(f, g, x, mean, rstd, rtol=1e-5, atol=1e-3)
    got = compiled(g, x, mean, rstd)
    ref = f(*(t.double() for t in (g, x, mean, rstd)))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-3)
    src = compiled.kernel_source
    assert "_v[" in src and "omp simd reduction" not in src, src
