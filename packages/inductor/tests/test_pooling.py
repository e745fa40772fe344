"""Max pooling against eager: padding, strides, dilation, ceil mode, NaNs, non-contiguous
inputs, values with and without indices; the values-only kernel stays branch-free."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import compile_fn


def _check(fn, x):
    compiled, flat = compile_fn(fn, x)
    got, want = compiled(*flat), fn(x)
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert torch.equal(g.isnan(), w.isnan()) if g.is_floating_point() else True
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)
    return compiled


def _images(shape=(2, 5, 17, 14), nan=True):
    x = torch.randn(shape[0], shape[1], shape[2] + 3, shape[3])[:, :, 1 : 1 + shape[2]]
    if nan:  # NaNs inside windows and on the border rows/columns that padding clamps onto
        x[0, 1, 0, 0] = float("nan")
        x[1, 2, 5, 7] = float("nan")
        x[1, 4, -1, -1] = float("nan")
    return x


@pytest.mark.parametrize(
    "kernel,stride,padding,dilation,ceil",
    [
        (3, 2, 1, 1, False),  # ResNet's stem pooling
        (3, 2, 1, 1, True),
        (2, 2, 0, 1, False),
        (3, 1, 1, 1, False),
        (3, 2, 1, 2, False),  # dilated: padded taps masked with -inf
        ((3, 2), (2, 1), (1, 1), 1, True),
    ],
)
def test_max_pool_values_match_eager(kernel, stride, padding, dilation, ceil):
    def fn(x):
        return F.max_pool2d(torch.relu(x), kernel, stride, padding, dilation, ceil_mode=ceil)

    _check(fn, _images())
    _check(fn, _images(nan=False))


@pytest.mark.parametrize("padding", [0, 1])
def test_max_pool_values_and_indices_match_eager(padding):
    """On the CPU the indices come from ATen's max pooling (its kernel is vectorized, the
    generated one is not); the GPU keeps the generated kernel (triton_cases.py,
    ``max_pool_indices``)."""

    def fn(x):
        return F.max_pool2d(torch.relu(x), 3, 2, padding, return_indices=True)

    compiled = _check(fn, _images())
    assert "aten.max_pool2d_with_indices.default" in compiled.report["fallback_ops"]
    # ties: the first maximum's index, like eager
    _check(fn, torch.zeros(1, 2, 9, 9))


def test_max_pool_values_alone_stay_generated():
    def fn(x):
        return F.max_pool2d_with_indices(torch.relu(x), 3, 2, 1)[0] * 2

    compiled = _check(fn, _images())
    assert not compiled.report["fallback_ops"], compiled.report["fallback_ops"]


def test_values_only_kernel_has_no_branching_logic():
    """`a || b` (or `&&`) feeding a select made GCC give up vectorizing the whole loop
    (control flow in the loop body): the values-only pooling kernel has none."""

    def fn(x):
        return F.max_pool2d(torch.relu(x), 3, 2, 1)

    compiled = _check(fn, _images())
    source = compiled.kernel_source
    assert "max" in source or "?" in source, source  # the pooling kernel is there
    assert "||" not in source and "&&" not in source, source


def test_max_pool_gradient_on_the_cpu_is_atens_kernel():
    """Max pooling's gradient is decomposed for GPUs (a gather that fuses, triton_cases.py
    ``max_pool_backward_gather``) but not on the CPU, where the generated gather stays a
    scalar loop and ATen's scatter to each argmax is an order of magnitude faster. The
    gradient of the ReLU in front fuses with what reads the library's result."""
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    x = _images(nan=False)
    _, idx = F.max_pool2d_with_indices(torch.relu(x), 3, 2, 1)
    g = torch.randn(*idx.shape)

    def fn(g, x, idx):
        grad = torch.ops.aten.max_pool2d_with_indices_backward(
            g, torch.relu(x), [3, 3], [2, 2], [1, 1], [1, 1], False, idx
        )
        return torch.where(x > 0, grad, 0.0)

    gm = trace(fn, g, x, idx, decompositions=decomposition_table())
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.max_pool2d_with_indices_backward.default in targets, targets
    compiled, flat = compile_fn(fn, g, x, idx)
    torch.testing.assert_close(compiled(*flat), fn(g, x, idx), rtol=0, atol=0)
    assert "aten.max_pool2d_with_indices_backward.default" in compiled.report["fallback_ops"]
