"""Training through danlu-aotautograd with danlu-inductor compiling forward and backward.

Accuracy rule (torch benchmark ``same()`` style, training): losses and gradients within
rtol=atol=1e-4 of eager float32, or cosine similarity >= 0.9999 against float64.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

aot = pytest.importorskip("danlu_aotautograd", reason="danlu-aotautograd is not installed")
if not hasattr(aot, "aot_module"):
    pytest.skip("danlu_aotautograd has no aot_module yet", allow_module_level=True)

from danlu_inductor import compile_fx  # noqa: E402

counts = {"graphs": 0, "kernels": 0}


def counting_compile_fx(gm, example_inputs):
    compiled = compile_fx(gm, example_inputs)
    counts["graphs"] += 1
    counts["kernels"] += getattr(compiled, "num_kernels", 0)
    return compiled


class MLPBlock(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.ln(x))))
        return (x + h).softmax(-1).sum()


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(h.mean((2, 3))).logsumexp(-1).sum()


def _close(a, b, ref64, tol=1e-4):
    if torch.allclose(a, b, rtol=tol, atol=tol):
        return True
    cos = F.cosine_similarity(a.double().flatten(), ref64.double().flatten(), dim=0)
    return bool(cos >= 0.9999)


@pytest.mark.parametrize("make", [MLPBlock, ConvNet], ids=["mlp_block", "convnet"])
def test_training_step_matches_eager(make):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(4, 16, 64) if make is MLPBlock else torch.randn(2, 3, 8, 8)
    ref_model = make()
    ref_model.load_state_dict(model.state_dict())
    ref64 = make().double()
    ref64.load_state_dict(model.state_dict())

    compiled = aot.aot_module(
        model, counting_compile_fx, counting_compile_fx, decompositions="canonical"
    )
    loss = compiled(x)
    loss.backward()
    ref_loss = ref_model(x)
    ref_loss.backward()
    loss64 = ref64(x.double())
    loss64.backward()

    assert _close(loss.detach(), ref_loss.detach(), loss64.detach())
    grads = dict(model.named_parameters())
    for name, p in ref_model.named_parameters():
        g, r = grads[name].grad, p.grad
        r64 = dict(ref64.named_parameters())[name].grad
        assert g is not None, name
        assert _close(g, r, r64), (name, (g - r).abs().max())
    assert counts["graphs"] >= 2 and counts["kernels"] >= 2
