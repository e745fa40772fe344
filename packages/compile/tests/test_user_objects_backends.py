"""User objects with operators, class-level state, contextmanager managers and autocast
through the tracing backends (aot_eager, inductor): values and gradients equal eager's, one
graph, no break."""

import contextlib

import pytest
import torch

import danlu


class Vec:
    count = 0

    def __init__(self, t):
        type(self).count += 1
        self.t = t

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.t + other.t)
        return NotImplemented

    def __radd__(self, other):
        return Vec(other * 2 + self.t)

    def __eq__(self, other):
        return isinstance(other, Vec) and self.t.shape == other.t.shape

    def __matmul__(self, other):
        return self.t @ other


STATE = {"scale": 1.0}


@contextlib.contextmanager
def scaled(s):
    old = STATE["scale"]
    STATE["scale"] = s
    try:
        yield
    finally:
        STATE["scale"] = old


def program(x, w):
    a, b = Vec(x), Vec(x.sin())
    c = a + b
    d = x + c  # Tensor -> NotImplemented -> Vec.__radd__
    same_shape = a == b
    with scaled(3.0):
        e = (d @ w) * STATE["scale"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f = x @ w
        g = f * 2 if f.dtype == torch.bfloat16 else f
    return e * (2 if same_shape else 1) + g.float(), Vec.count, STATE["scale"], g.dtype


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_user_objects_through_tracing_backends(backend):
    danlu.reset()
    opt = danlu.compile(program, backend=backend)
    for _ in range(2):
        x = torch.randn(4, 6, requires_grad=True)
        w = torch.randn(6, 3, requires_grad=True)
        x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        Vec.count = 0
        ref = program(x, w)
        Vec.count = 0
        res = opt(x2, w2)
        assert ref[1:] == res[1:]
        assert ref[0].dtype == res[0].dtype
        assert torch.allclose(ref[0], res[0], rtol=2e-2, atol=2e-2)
        ref[0].sum().backward()
        res[0].sum().backward()
        assert torch.allclose(x.grad, x2.grad, rtol=2e-2, atol=2e-2)
        assert torch.allclose(w.grad, w2.grad, rtol=2e-2, atol=2e-2)
    stats = danlu.CompileStats.current()
    assert stats.graph_breaks == 0
