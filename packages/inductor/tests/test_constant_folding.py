"""Values that depend on no input are computed at compile time: a mask built from sizes
(shifted-window attention's) becomes one constant the kernels read; random ops, values that
read an input, lone factories and big constants are left alone."""

from __future__ import annotations

import torch
from helpers import aten_graph, check_same

from danlu_inductor.passes import fold_constants


def window_mask_attention(x):
    """A shifted-window style mask, rebuilt from sizes on every call (written functionally:
    graphs traced with in-place writes are not folded), added to the scores."""
    n = x.shape[-1]
    rows = torch.arange(n)
    region = (rows >= n - 3).long() + (rows >= n - 1).long()
    cols = (torch.arange(n) >= n - 2).long()
    mask = (region.unsqueeze(1) * 10 + cols.unsqueeze(0)).float()
    diff = (mask.unsqueeze(0) - mask.unsqueeze(1)).ne(0).float()
    bias = diff.masked_fill(mask.ne(0), -100.0).sum(0)
    return torch.softmax(x @ x.transpose(-1, -2) + bias, -1)


def test_graphs_that_write_in_place_are_not_folded():
    def f(x):
        mask = torch.zeros(4, 4)
        mask[1:3] = 2.0  # an in-place write in the traced graph
        return x + mask.exp().sin()

    x = torch.randn(4, 4)
    gm = aten_graph(f, x)
    assert fold_constants(gm) == 0
    check_same(f, x)


def test_mask_chain_is_folded_and_values_match():
    x = torch.randn(2, 8, 8)
    gm = aten_graph(window_mask_attention, x)
    before = len(gm.graph.nodes)
    assert fold_constants(gm) >= 1
    assert len(gm.graph.nodes) < before - 10  # the chain is gone, a constant is read instead
    assert any(n.op == "get_attr" and n.target.startswith("_folded") for n in gm.graph.nodes)
    compiled = check_same(window_mask_attention, x)
    unfolded = aten_graph(window_mask_attention, x)
    assert compiled.num_kernels < len([n for n in unfolded.graph.nodes if n.op == "call_function"])
    for _ in range(2):  # the folded value serves every call
        y = torch.randn(2, 8, 8)
        torch.testing.assert_close(compiled(y), window_mask_attention(y))


def test_values_reading_inputs_and_random_ops_are_not_folded():
    def f(x):
        noise = torch.rand(4, 4)  # a new value every call
        ramp = torch.arange(16.0).view(4, 4).exp().sin()  # constant: folded
        scaled = ramp * x.shape[0] + x  # reads x: computed per call
        return scaled + noise * 0

    x = torch.randn(4, 4)
    gm = aten_graph(f, x)
    assert fold_constants(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.rand.default in targets or any("rand" in str(t) for t in targets)
    assert torch.ops.aten.add.Tensor in targets


def test_lone_factories_and_big_constants_stay():
    def small(x):
        return x + torch.ones(4, 4)  # one op: fuses into the add for free

    def big(x):  # the constant read per call has 2M elements: kept as a computation
        return x.reshape(-1)[:1] + torch.arange(float(1 << 21)).mul(1e-6).exp().sin()

    for fn in (small, big):
        x = torch.randn(4, 4)
        gm = aten_graph(fn, x)
        assert fold_constants(gm) == 0, fn.__name__
        check_same(fn, x)
