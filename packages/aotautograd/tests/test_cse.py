"""Common subexpression elimination before partitioning: one node for autocast's repeated casts
of one input, none merged that must stay apart (random ops, two returned tensors, constants of
other types)."""

import torch
from helpers import capturing_compilers, check, count_calls
from torch import nn

import danlu_aotautograd as da
from danlu_aotautograd.cse import eliminate_common_subexpressions

aten = torch.ops.aten


class QKV(nn.Module):
    """Three projections of one input, as attention's q, k and v: under autocast each linear
    casts the input to bf16."""

    def __init__(self, width=16):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(width, width, bias=False) for _ in range(3))

    def forward(self, x):
        return (self.q(x) * self.k(x) + self.v(x)).float().square().mean()


def test_autocast_casts_of_one_input_become_one_node_and_values_match():
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model = QKV()
    ref = QKV()
    ref.load_state_dict(model.state_dict())
    graphs, compiler = capturing_compilers()
    compiled = da.aot_module(model, compiler("fw"), bw_compiler=compiler("bw"))
    x = torch.randn(5, 7, 16).transpose(0, 1)  # non-contiguous
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, loss_ref = compiled(x), ref(x)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=0, atol=0)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0)
    fw = graphs["fw"]
    casts_of_x = [
        n
        for n in fw.graph.nodes
        if n.target is aten._to_copy.default
        and n.args[0].op == "placeholder"
        and n.args[0].meta["val"].dim() == 3
    ]
    assert len(casts_of_x) == 1, [n.format_node() for n in casts_of_x]


def test_random_ops_are_not_merged():
    def fn(x):
        return torch.rand_like(x) + x, torch.rand_like(x) + x

    graphs, compiler = capturing_compilers()
    compiled = da.aot_function(fn, compiler("fw"))
    a, b = compiled(torch.zeros(1000))
    assert not torch.equal(a, b)
    assert count_calls(graphs["fw"], aten.rand_like.default) == 2


def test_two_returned_results_stay_two_tensors():
    def fn(x):
        return x * 2, x * 2

    check(fn, [torch.randn(4, 3, requires_grad=True)])
    compiled = da.aot_function(fn, da.run_graph)
    a, b = compiled(torch.randn(4, 3))
    assert a.data_ptr() != b.data_ptr()
    a.add_(1)
    assert not torch.equal(a, b)


def test_only_equal_calls_merge():
    """add(x, 1) and add(x, 1.0) differ for integer tensors; add(x, y) and add(y, x) are
    different calls; equal calls merge, their users follow the one kept."""

    def fn(x, y):
        return (x + 1) * (x + 1.0), (x + y) - (y + x), (x * 3) + (x * 3)

    graphs, compiler = capturing_compilers()
    compiled = da.aot_function(fn, compiler("fw"))
    x, y = torch.arange(6), torch.arange(6) * 5
    for got, want in zip(compiled(x, y), fn(x, y)):
        assert got.dtype == want.dtype and torch.equal(got, want)
    gm = graphs["fw"]
    assert count_calls(gm, aten.mul.Tensor) == 2  # (x + 1) * (x + 1.0), and one x * 3
    assert count_calls(gm, aten.add.Tensor) == 5  # x + 1, x + 1.0, x + y, y + x, and the sum
    assert eliminate_common_subexpressions(gm) == 0  # nothing left to merge
