"""Whole models on CPU through ``inference_backend``, against eager.

Accuracy rule (like torch's benchmark ``same()``): fp32 outputs must satisfy
allclose(rtol=atol=1e-4) against eager, or have cosine similarity >= 0.9999 with the float64
reference. Library kernels (mm, conv) run the same ATen code as eager; differences come from
the fused loops' summation order and libm vs eager's vectorized math.
"""

from __future__ import annotations

import logging

import pytest
import torch
from helpers import aten_graph
from models import GPT2Small, ResNet18, TransformerBlock, randomize_bn

from danlu_inductor import compile_fx, inference_backend


def _same(got, ref, ref64, tol=1e-4):
    if torch.allclose(got, ref, rtol=tol, atol=tol):
        return True
    cos = torch.nn.functional.cosine_similarity(got.double().flatten(), ref64.flatten(), dim=0)
    return bool(cos >= 0.9999)


def _run(model, x):
    model.eval()
    run = inference_backend(model, [x])
    with torch.no_grad():
        ref = model(x)
        got = run(x)
        ref64 = model.double()(x.double() if x.is_floating_point() else x)
    model.float()
    return got, ref, ref64, run


@pytest.mark.parametrize("sdpa", [False, True])
def test_transformer_block_inference(sdpa):
    torch.manual_seed(0)
    got, ref, ref64, run = _run(TransformerBlock(128, 4, sdpa, ctx=64), torch.randn(2, 16, 128))
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert _same(got, ref, ref64), (got - ref).abs().max()
    assert run.compiled().num_kernels >= 1


def test_resnet18_inference():
    torch.manual_seed(0)
    model = randomize_bn(ResNet18(num_classes=10, width=16))
    got, ref, ref64, run = _run(model, torch.randn(2, 3, 64, 64))
    assert got.shape == ref.shape
    assert _same(got, ref, ref64), (got - ref).abs().max()
    rep = run.compiled().report
    assert rep["extern_calls"] >= 20  # the convolutions and the classifier


def test_tiny_gpt2_inference():
    torch.manual_seed(0)
    model = GPT2Small(vocab=100, dim=64, heads=4, layers=2, ctx=32)
    idx = torch.randint(0, 100, (2, 16))
    got, ref, ref64, run = _run(model, idx)
    assert _same(got, ref, ref64), (got - ref).abs().max()


def test_inference_backend_keeps_gradients(caplog):
    torch.manual_seed(0)
    model = TransformerBlock(32, 2)
    x = torch.randn(2, 4, 32, requires_grad=True)
    run = inference_backend(model, [x])
    with caplog.at_level(logging.WARNING, logger="danlu_inductor"):
        out = run(x)
    out.sum().backward()
    assert x.grad is not None and model.fc.weight.grad is not None
    assert any("require grad" in r.message for r in caplog.records)


def test_parameters_are_read_at_call_time():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8).eval()
    x = torch.randn(3, 8)
    run = inference_backend(model, [x])
    with torch.no_grad():
        run(x)
        model.weight.mul_(2)
        torch.testing.assert_close(run(x), model(x))


@pytest.mark.parametrize("shape", [(4, 7), (3, 1, 5)])
def test_compiled_rejects_wrong_shapes(shape):
    model = torch.nn.Linear(shape[-1], 2).eval()
    x = torch.randn(*shape)
    run = inference_backend(model, [x])
    with torch.no_grad():
        run(x)
        with pytest.raises((ValueError, RuntimeError)):
            run(torch.randn(*shape[:-1], shape[-1] + 1))


def test_fallback_reasons_are_reported():
    """Each ATen fallback says why it was not lowered (the compile report shows it)."""

    def fn(x, idx):
        # cumsum has no lowering; a complex sum is refused by the sum lowering
        return x.cumsum(0), idx.sum(dtype=torch.complex64)

    from helpers import compile_fn

    compiled, _ = compile_fn(fn, torch.randn(4, 3), torch.arange(6))
    reasons = compiled.report["fallback_reasons"]
    assert reasons["aten.cumsum.default"] == "no lowering for this op"
    assert set(reasons) == set(compiled.report["fallback_ops"])


def test_profiled_kernels_show_in_a_torch_profile(monkeypatch):
    # DANLU_PROFILE_KERNELS=1: each generated kernel runs in a profiler range named after
    # what it computes; the results are unchanged
    monkeypatch.setenv("DANLU_PROFILE_KERNELS", "1")

    def f(x, w):
        return (x @ w).relu().sum(-1), (x * 2).exp()

    x, w = torch.randn(8, 16), torch.randn(16, 4)
    compiled = compile_fx(aten_graph(f, x, w), [x, w])
    with torch.profiler.profile() as prof:
        out = compiled(x, w)
    torch.testing.assert_close(out, f(x, w))
    names = {e.key for e in prof.key_averages()}
    ours = sorted(n for n in names if n.startswith("kernel") and ":danlu_" in n)
    assert any(":danlu_red_sum" in n and "[8 | r 4]" in n for n in ours), ours
    assert any(":danlu_poi_" in n and "exp" in n for n in ours), ours
