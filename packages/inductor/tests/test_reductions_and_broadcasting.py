"""Reductions over every combination of dims (keepdim or not), on contiguous and permuted
inputs; broadcasting between ranks; the split-across-threads path; NaN and integer rules."""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import aten_graph, check_same, compile_fn

from danlu_inductor import compile_fx_batch

torch.manual_seed(0)
SHAPE = (3, 4, 5)
DIMS = [list(c) for r in range(1, 4) for c in itertools.combinations(range(3), r)]
REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k),
    "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "amax": lambda x, d, k: x.amax(d, keepdim=k),
    "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "prod": lambda x, d, k: x.prod(d[0], keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k),
    "std": lambda x, d, k: x.std(d, correction=0, keepdim=k),
    "argmax": lambda x, d, k: x.argmax(d[0], keepdim=k),
    "argmin": lambda x, d, k: x.argmin(d[0], keepdim=k),
    "any": lambda x, d, k: (x > 0.5).any(d[0], keepdim=k),
    "all": lambda x, d, k: (x > -1.5).all(d[0], keepdim=k),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
}


def _inputs():
    base = torch.randn(*SHAPE, dtype=torch.float64)
    permuted = torch.randn(5, 3, 4, dtype=torch.float64).permute(1, 2, 0)
    return {"contiguous": base, "permuted": permuted}


@pytest.fixture(scope="module")
def reduction_results():
    cases = []
    for (name, fn), dims, keep, (layout, x) in itertools.product(
        REDUCTIONS.items(), DIMS, (False, True), _inputs().items()
    ):
        if name in ("prod", "argmax", "argmin", "any", "all") and len(dims) > 1:
            continue

        def f(x, fn=fn, dims=dims, keep=keep):
            return fn(x, dims, keep)

        cases.append((f"{name}-{dims}-{keep}-{layout}", f, x))
    gms = [(aten_graph(f, x), [x]) for _, f, x in cases]
    return cases, compile_fx_batch(gms)


def test_reductions_every_dim_combination(reduction_results):
    cases, compiled = reduction_results
    failures = []
    for (cid, f, x), c in zip(cases, compiled):
        try:
            torch.testing.assert_close(c(x), f(x))
        except AssertionError as e:
            failures.append(f"{cid}: {e}")
    assert len(cases) > 150
    assert not failures, "\n".join(failures[:10])


def test_broadcasting_and_scalars():
    a = torch.randn(4, 1, 5)
    b = torch.randn(3, 1)
    c = torch.randn(5)
    s = torch.tensor(2.5)
    fns = [
        lambda a, b, c, s: a + b * c - s,
        lambda a, b, c, s: torch.where(a > 0, b, c),
        lambda a, b, c, s: (a * 3).expand(4, 3, 5) + b,
        lambda a, b, c, s: torch.maximum(a, c) / (s + 1),
    ]
    items = [(aten_graph(f, a, b, c, s), [a, b, c, s]) for f in fns]
    for f, comp in zip(fns, compile_fx_batch(items)):
        torch.testing.assert_close(comp(a, b, c, s), f(a, b, c, s))


def test_large_reduction_splits_across_threads():
    x = torch.randn(1 << 18, dtype=torch.float32)
    fns = [
        lambda x: x.sum(),
        lambda x: x.amax(),
        lambda x: x.argmax(),
        lambda x: x.var(),
        lambda x: (x * x).mean(),
    ]
    items = [(aten_graph(f, x), [x]) for f in fns]
    compiled = compile_fx_batch(items)
    for f, c in zip(fns, compiled):
        ref = f(x.double()) if f(x).is_floating_point() else f(x)
        torch.testing.assert_close(
            c(x).double() if ref.is_floating_point() else c(x), ref, rtol=1e-5, atol=1e-5
        )
    assert "omp_get_thread_num" in compiled[0].kernel_source


def test_nan_propagates_through_max_and_argmax():
    x = torch.randn(4, 6)
    x[1, 2] = float("nan")
    x[2, 0] = float("inf")
    fns = [lambda x: x.amax(1), lambda x: x.argmax(1), lambda x: torch.maximum(x, x.t()[:1, :1])]
    items = [(aten_graph(f, x), [x]) for f in fns]
    for f, c in zip(fns, compile_fx_batch(items)):
        torch.testing.assert_close(c(x), f(x), equal_nan=True)


def test_division_by_a_row_reduction_matches_eager_at_the_edges():
    # inside a row loop, x / (row sum) multiplies by a per-row reciprocal unless that
    # reciprocal would overflow or lose bits (tiny, huge, zero, inf, NaN sums): check both paths
    x = torch.rand(8, 33) + 0.1
    x[1] *= 1e-40  # subnormal entries and sum: 1/sum overflows
    x[2] *= 3e36  # sum > 2**126: 1/sum would be subnormal
    x[3] = 0.0  # 0/0
    x[4, 5] = float("inf")
    x[5, 7] = float("nan")
    x[6] *= -1.0
    fns = [
        lambda x: x / x.sum(-1, keepdim=True),
        lambda x: torch.softmax(torch.cat([x[:4], x[5:]]) * 50, -1),  # row 4: see below
        lambda x: x / x.amax(-1, keepdim=True),
    ]
    items = [(aten_graph(f, x), [x]) for f in fns]
    for f, c in zip(fns, compile_fx_batch(items)):
        torch.testing.assert_close(c(x), f(x), equal_nan=True)
    assert "dl_recip_ok" in c.kernel_source


def test_softmax_of_a_row_holding_inf_is_nan_like_eager():
    # a +inf max is not shifted to 0 (that is for rows of -inf only): the row is NaN
    x = torch.randn(4, 8)
    x[1, 2] = float("inf")
    x[2] = float("-inf")
    x[3, :5] = float("-inf")
    for fn in (lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1)):
        c, _ = compile_fn(fn, x)
        torch.testing.assert_close(c(x), fn(x), equal_nan=True)


def test_integer_division_and_overflow_follow_torch():
    a = torch.tensor([7, -7, 7, -7, 0, 2**62], dtype=torch.int64)
    b = torch.tensor([2, 2, -2, -2, 3, 4], dtype=torch.int64)
    fns = [
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: torch.remainder(a, b),
        lambda a, b: torch.fmod(a, b),
        lambda a, b: a * b,  # 2**62 * 4 wraps like eager
        lambda a, b: (a.to(torch.int32) + 2**31 - 1).to(torch.int64),
    ]
    items = [(aten_graph(f, a, b), [a, b]) for f in fns]
    for f, c in zip(fns, compile_fx_batch(items)):
        torch.testing.assert_close(c(a, b), f(a, b))


def test_reduced_precision_floats_compute_in_float32():
    x = torch.randn(8, 64).to(torch.bfloat16)
    h = torch.randn(8, 64).to(torch.float16)
    fns = [
        lambda x, h: (x * 2 + 1).softmax(-1),
        lambda x, h: (h.float() + x.float()).sum(1),
        lambda x, h: h.exp() - 1,
    ]
    items = [(aten_graph(f, x, h), [x, h]) for f in fns]
    for f, c in zip(fns, compile_fx_batch(items)):
        got, ref = c(x, h), f(x, h)
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)


def test_noncontiguous_input_at_call_time_is_handled():
    x = torch.randn(6, 4)
    gm = aten_graph(lambda x: x * 2, x)
    (c,) = compile_fx_batch([(gm, [x])])
    y = torch.randn(4, 6).t()
    torch.testing.assert_close(c(y), y * 2)


def test_masked_softmax_with_a_bool_mask_matches_eager():
    # bool tensors go through uint8_t pointers (so the mask loads vectorize); a causal mask,
    # a transposed (strided) mask, and a row masked out entirely (NaN row, like eager)
    x = torch.randn(3, 16, 16)
    causal = torch.ones(20, 20, dtype=torch.bool).tril()[:16, :16]
    other = torch.rand(16, 16).t() > 0.3
    other[5] = False

    def f(x, m):
        return torch.softmax(x.masked_fill(~m, float("-inf")), -1), m & (x > 0)

    items = [(aten_graph(f, x, m), [x, m]) for m in (causal, other)]
    compiled = compile_fx_batch(items)
    for m, c in zip((causal, other), compiled):
        got, ref = c(x, m), f(x, m)
        torch.testing.assert_close(got[0], ref[0], equal_nan=True)
        assert got[1].dtype == torch.bool and torch.equal(got[1], ref[1])
    assert "const uint8_t*" in compiled[0].kernel_source
    assert "bool*" not in compiled[0].kernel_source


def test_batch_norm_statistics_on_the_cpu_are_two_vectorizable_passes():
    """Per-channel statistics over 25088 values (ResNet-18's first batch norm at batch 2): on
    the CPU two summing passes over the row (it stays in L2), not one scalar Welford pass;
    the variance matches float64 eager."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    def stats(x):
        return torch.var_mean(x, (0, 2, 3), correction=0)

    x = torch.randn(2, 8, 112, 112, dtype=torch.float64) * 3 + 5
    gm = aten_graph(stats, x)
    graph = GraphLowering(gm, [x]).run()
    kinds = [
        b.data.reduction_type
        for b in graph.buffers
        if isinstance(b, ComputedBuffer) and isinstance(b.data, Reduction)
    ]
    assert kinds and not any("welford" in k for k in kinds), kinds
    check_same(stats, x, rtol=1e-12, atol=1e-12)
