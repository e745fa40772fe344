"""Training through the convolution layout choice: the compiled forward saves values for
the backward channels-last, the backward is compiled for that layout (danlu_aotautograd
restrides its inputs from the forward's ``output_strides``), and the gradients match a
float64 eager run on fresh inputs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import danlu
from danlu_aotautograd import aot_module
from danlu_inductor import compile_fx


class DepthwiseNet(nn.Module):
    """MobileNet-style: 1x1 expand, depthwise 3x3, 1x1 project, batch norm, residual."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, stride=2, padding=1)
        self.bn0 = nn.BatchNorm2d(c)
        self.expand = nn.Conv2d(c, 4 * c, 1)
        self.dw = nn.Conv2d(4 * c, 4 * c, 3, padding=1, groups=4 * c)
        self.bn1 = nn.BatchNorm2d(4 * c)
        self.project = nn.Conv2d(4 * c, c, 1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        x = torch.relu(self.bn0(self.stem(x)))
        y = nn.functional.hardswish(self.expand(x))
        y = torch.relu(self.bn1(self.dw(y)))
        x = self.pool(self.project(y) + x)
        return self.fc(x.mean((2, 3)))


def _images(batch=2, size=32):
    # non-contiguous: a crop of a larger batch
    return torch.randn(batch, 3, size + 4, size)[:, :, 2 : 2 + size, :]


def _step(model, x):
    out = model(x)
    loss = out.logsumexp(-1).mean()
    loss.backward()
    # in parameter order: a wrapper's names carry its own prefix
    grads = [(n, p.grad.detach().clone()) for n, p in model.named_parameters()]
    for p in model.parameters():
        p.grad = None
    return loss.detach(), grads


def _check_close(model, compiled, steps=2):
    ref64 = copy.deepcopy(model).double()
    for _ in range(steps):
        x = _images()
        loss, grads = _step(compiled, x)
        loss64, grads64 = _step(ref64, x.double())
        torch.testing.assert_close(loss.double(), loss64, rtol=1e-4, atol=1e-5)
        assert len(grads) == len(grads64)
        for (name, g), (_, g64) in zip(grads, grads64):
            torch.testing.assert_close(g.double(), g64, rtol=1e-3, atol=1e-4, msg=name)


def _recording(made):
    def compiler(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)
        made.append(compiled)
        return compiled

    return compiler


@pytest.mark.parametrize("setting", ["1", "0"])
def test_backward_compiled_for_saved_layouts(setting, monkeypatch):
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", setting)
    torch.manual_seed(0)
    model = DepthwiseNet().train()
    forwards, backwards = [], []
    compiled = aot_module(copy.deepcopy(model), _recording(forwards), _recording(backwards))
    _check_close(model, compiled)
    assert len(forwards) == 1 and len(backwards) == 1
    fw = forwards[0]
    outs = [n for n in fw.graph.gm.graph.nodes if n.op == "output"][0].args[0]
    saved_from = fw.graph.gm.meta["saved_for_backward_from"]
    saved_4d = [
        (stride, o.meta["val"])
        for stride, o in zip(fw.output_strides[saved_from:], outs[saved_from:])
        if isinstance(o, torch.fx.Node) and getattr(o.meta.get("val"), "dim", lambda: 0)() == 4
    ]
    assert saved_4d
    changed = [stride != tuple(val.stride()) for stride, val in saved_4d]
    if setting == "1":
        assert any(changed), "no saved value was laid out channels-last"
        # the backward's inputs (the saved values first) were traced with those strides
        bw = backwards[0].graph.gm
        bw_inputs = [n.meta["val"] for n in bw.graph.nodes if n.op == "placeholder"]
        saved = fw.output_strides[saved_from:]
        restrided = [s for v, s in zip(bw_inputs, saved) if s is not None and v.dim() == 4]
        assert restrided and all(
            tuple(v.stride()) == s
            for v, s in zip(bw_inputs, saved)
            if s is not None and v.dim() == 4
        )
    else:
        assert not any(changed)


def test_danlu_compile_trains_with_the_default_choice(monkeypatch):
    monkeypatch.delenv("DANLU_CONV_CHANNELS_LAST", raising=False)
    torch.manual_seed(1)
    model = DepthwiseNet().train()
    compiled = danlu.compile(copy.deepcopy(model))
    _check_close(model, compiled, steps=3)
    # inference on the same module, eval mode (running statistics), fresh images
    model.eval()
    compiled_eval = danlu.compile(copy.deepcopy(model))
    with torch.no_grad():
        x = _images(3, 40)
        torch.testing.assert_close(
            compiled_eval(x).double(),
            copy.deepcopy(model).double()(x.double()),
            rtol=1e-4,
            atol=1e-5,
        )
