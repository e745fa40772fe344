"""Dynamic shapes end to end: danlu-aotautograd traces forward+backward with symbolic sizes,
``compile_fx`` compiles each graph once, and every later size runs the same kernels.

danlu-aotautograd is not a dependency of danlu-inductor: these tests skip where it is not
installed (the package's own test session); the monorepo environment runs them.
"""

from __future__ import annotations

import math

import pytest
import torch

from danlu_inductor import compile_fx
from danlu_inductor.codegen.cpp import compiler
from danlu_inductor.decompositions import decomposition_table

da = pytest.importorskip("danlu_aotautograd")


class Counting:
    """A compiler that counts compile_fx calls and keeps what they returned."""

    def __init__(self):
        self.compiled = []

    def __call__(self, gm, example_inputs):
        c = compile_fx(gm, example_inputs)
        self.compiled.append(c)
        return c


def _builds():
    return compiler.CompileStats.hits + compiler.CompileStats.misses


def _run(fn, make, sizes, dynamic, rtol=1e-4, atol=1e-5):
    comp = Counting()
    f = da.aot_function(fn, comp, dynamic=dynamic, decompositions=decomposition_table())
    builds = None
    for k, size in enumerate(sizes):
        torch.manual_seed(1000 + k)
        args = make(*size)
        ref_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        out = f(*args)
        grad = torch.randn_like(out)
        out.backward(grad)
        expected = fn(*ref_args)
        expected.backward(grad)
        torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)
        for a, r in zip(args, ref_args):
            if a.requires_grad:
                torch.testing.assert_close(a.grad, r.grad, rtol=rtol, atol=atol)
        if k == 0:
            builds = _builds()
    assert _builds() == builds, "later sizes must not build kernels"
    assert f.stats["traces"] == 1 and f.stats["retraces"] == 0, f.stats
    assert len(comp.compiled) == 2  # one forward, one backward
    for c in comp.compiled:
        assert c.report.get("fallback_reason") is None, c.report
        assert c.report["dynamic"] and c.report["kernels"] > 0
    return comp


def test_mlp_forward_backward_over_sizes():
    def mlp(x, w1, b1, w2, b2):
        h = torch.nn.functional.gelu(x @ w1 + b1)
        return torch.log_softmax(h @ w2 + b2, -1)

    def make(batch, features):
        params = [
            torch.randn(features, 16) / math.sqrt(features),
            torch.randn(16),
            torch.randn(16, 5) / 4,
            torch.randn(5),
        ]
        x = torch.randn(batch, features, requires_grad=True)
        return [x, *[p.requires_grad_() for p in params]]

    sizes = [(4, 12), (7, 12), (2, 5), (33, 9), (3, 17), (16, 3)]
    comp = _run(mlp, make, sizes, dynamic=True)
    assert "int64_t s" in comp.compiled[0].kernel_source


def test_transformer_block_forward_backward_over_sizes():
    def block(x, wq, wk, wv, wo, w1, w2, g1, b1):
        b, t, d = x.shape
        h = torch.nn.functional.layer_norm(x, (d,), g1, b1)
        q, k, v = h @ wq, h @ wk, h @ wv
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), -1)
        x = x + (att @ v) @ wo
        return x + torch.relu(x @ w1) @ w2

    d = 8

    def make(b, t):
        def p(*shape):
            return (torch.randn(*shape) / math.sqrt(shape[0])).requires_grad_()

        x = torch.randn(b, t, d, requires_grad=True)
        return [x, p(d, d), p(d, d), p(d, d), p(d, d), p(d, 16), p(16, d), p(d), p(d)]

    sizes = [(2, 5), (3, 7), (2, 2), (5, 3), (4, 11)]
    # batch and sequence symbolic; the weights keep their sizes
    _run(block, make, sizes, dynamic=lambda i, t: (0, 1) if i == 0 else None)


def test_size_saved_for_backward_is_an_int():
    """A size the backward needs without a tensor to read it from arrives as an int input."""

    def fn(x, y):
        return (x.reshape(-1) * 2).sum() * y

    def make(a, b):
        return [torch.randn(a, b, requires_grad=True), torch.randn((), requires_grad=True)]

    sizes = [(3, 4), (5, 2), (2, 9), (8, 8), (3, 3)]
    comp = Counting()
    f = da.aot_function(fn, comp, dynamic=True, decompositions=decomposition_table())
    for a, b in sizes:
        x, y = make(a, b)
        rx, ry = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        f(x, y).backward()
        fn(rx, ry).backward()
        torch.testing.assert_close(x.grad, rx.grad)
        torch.testing.assert_close(y.grad, ry.grad)
    assert f.stats["traces"] == 1
