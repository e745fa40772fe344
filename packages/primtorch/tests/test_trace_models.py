"""Trace real blocks built from torch.nn, forward and backward, on fakes; run the ATen graph on
real random inputs and compare with eager (outputs, gradients, mutated buffers)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call
from torch.utils._pytree import tree_leaves

from danlu_primtorch import FakeTensor, FakeTensorMode, format_graph, trace

aten = torch.ops.aten


class TransformerBlock(nn.Module):
    def __init__(self, dim=32, heads=4, hidden=64):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class BasicBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


def forward_only(module):
    def f(state, x):
        return functional_call(module, state, (x,))

    return f


def forward_backward(module):
    def f(params, buffers, x):
        out = functional_call(module, {**params, **buffers}, (x,))
        loss = (out * out).mean()
        grads = torch.autograd.grad(loss, [x, *params.values()])
        return out, loss, grads

    return f


def state_of(module):
    params = {k: v.detach().clone().requires_grad_() for k, v in module.named_parameters()}
    buffers = {k: v.clone() for k, v in module.named_buffers()}
    return params, buffers


def assert_close_tree(got, want, atol):
    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=atol, rtol=1e-4)


def check_graph(gm):
    ops = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    for n in gm.graph.nodes:
        if n.op != "output":
            assert "val" in n.meta, n.format_node()
    for n in gm.graph.nodes:
        if n.op == "placeholder" and isinstance(n.meta["val"], torch.Tensor):
            assert isinstance(n.meta["val"], FakeTensor)
    return ops


@pytest.mark.parametrize("make", [TransformerBlock, BasicBlock], ids=["transformer", "resnet"])
def test_forward_graph_matches_eager(make):
    torch.manual_seed(0)
    module = make().eval()
    x = torch.randn(2, 6, 32) if make is TransformerBlock else torch.randn(2, 8, 10, 10)
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    state = {k: v.detach().clone() for k, v in state.items()}
    gm = trace(forward_only(module), state, x)
    check_graph(gm)
    x2 = torch.randn_like(x)  # new random data, same shapes
    assert_close_tree(gm(*tree_leaves((state, x2))), forward_only(module)(state, x2), 1e-5)


@pytest.mark.parametrize("make", [TransformerBlock, BasicBlock], ids=["transformer", "resnet"])
def test_forward_backward_graph_matches_eager(make):
    torch.manual_seed(0)
    module = make().train()
    shape = (2, 6, 32) if make is TransformerBlock else (2, 8, 10, 10)
    params, buffers = state_of(module)
    x = torch.randn(shape, requires_grad=True)
    gm = trace(forward_backward(module), params, buffers, x)
    ops = check_graph(gm)
    # the backward ran through the tracer
    if make is TransformerBlock:
        assert aten.native_layer_norm_backward.default in ops
        assert aten._softmax_backward_data.default in ops
    else:
        assert aten.convolution_backward.default in ops
        assert any("batch_norm" in str(o) and "backward" in str(o) for o in ops)
    assert "%" in format_graph(gm)

    # run the graph and eager on fresh random data; buffers are mutated (BN running stats)
    x2 = torch.randn(shape, requires_grad=True)
    p_graph, b_graph = state_of(module)
    p_eager, b_eager = copy.deepcopy((p_graph, b_graph))
    got = gm(*tree_leaves((p_graph, b_graph, x2)))
    want = forward_backward(module)(p_eager, b_eager, x2)
    assert_close_tree(got, want, atol=1e-5)
    assert_close_tree(b_graph, b_eager, atol=1e-6)  # running stats updated alike
    if make is BasicBlock:
        assert not torch.equal(b_graph["bn1.running_mean"], buffers["bn1.running_mean"])


def test_transformer_on_fake_cuda_records_cuda_graph():
    torch.manual_seed(0)
    module = TransformerBlock()
    mode = FakeTensorMode()
    params, buffers = state_of(module)
    fparams = {k: mode.from_real(v).cuda().detach().requires_grad_() for k, v in params.items()}
    with mode:
        x = torch.randn(2, 6, 32, device="cuda", requires_grad=True)
    gm = trace(forward_backward(module), fparams, {}, x)
    cuda0 = torch.device("cuda", 0)
    for n in gm.graph.nodes:
        for v in tree_leaves(n.meta.get("val")):
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                assert v.device == cuda0, n.format_node()
        for a in tree_leaves((n.args, n.kwargs)):
            if isinstance(a, torch.device):
                assert a == cuda0, n.format_node()
