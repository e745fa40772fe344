"""State a compiled call must update as eager does, on every device at hand: batch-norm
running statistics under fp32 and bf16 autocast, in-place updates of inputs of several
dtypes, and negative or conjugate views given to a graph compiled for plain tensors (the
write-back itself: danlu-aotautograd's `test_functionalization.py`, on every device too).
CUDA cases run on a GPU machine (`pytest integration_tests/test_state_updates_on_devices.py`
there)."""

from __future__ import annotations

import copy

import pytest
import torch

import danlu
from danlu.testing import same

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")),
]


@pytest.fixture(autouse=True)
def _fresh():
    danlu.reset()
    yield
    danlu.reset()


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16"])
def test_batch_norm_training_updates_running_stats(dev, amp):
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Conv2d(16, 8, 3),
        torch.nn.BatchNorm2d(8),
    ).to(dev)
    ref = copy.deepcopy(m)
    c = danlu.compile(m)
    for _ in range(3):
        x = torch.randn(4, 3, 20, 20, device=dev)
        with torch.autocast(dev, torch.bfloat16, enabled=amp):
            out, exp = c(x), ref(x)
        out.float().square().mean().backward()
        exp.float().square().mean().backward()
    tol = dict(atol=3e-2, rtol=3e-2) if amp else dict(atol=1e-4, rtol=1e-3)
    for (n, b), (_, r) in zip(m.named_buffers(), ref.named_buffers()):
        torch.testing.assert_close(b, r, msg=n, **tol)
    for (n, p), (_, r) in zip(m.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, r.grad, msg=n, **tol)


@pytest.mark.parametrize("dev", DEVICES)
def test_in_place_updates_of_inputs(dev):
    def f(a, b, c):
        a.add_(1)
        b.mul_(2)
        c.copy_(a[:3].to(c.dtype))
        return a.sum() + b.float().sum()

    cf = danlu.compile(f)
    for _ in range(2):
        a = torch.randn(8, device=dev)
        b = torch.randn(5, device=dev, dtype=torch.bfloat16)
        c = torch.zeros(3, device=dev, dtype=torch.float16)
        a2, b2, c2 = a.clone(), b.clone(), c.clone()
        assert same(cf(a, b, c), f(a2, b2, c2))
        assert torch.equal(a, a2) and torch.equal(b, b2) and torch.equal(c, c2)


@pytest.mark.parametrize("dev", DEVICES)
def test_negative_and_conjugate_views(dev):
    def g(x):
        return x.sin() * 2

    c = danlu.compile(g)
    x = torch.randn(6, device=dev)
    assert same(c(x), g(x))
    nx = torch._neg_view(x)
    assert same(c(nx), g(nx))
    z = torch.randn(6, dtype=torch.cfloat, device=dev)
    assert same(c(z), g(z))
    assert same(c(z.conj()), g(z.conj()))
