"""The backward's recomputed forward ops sit just before their first user, not all at the
backward's start (where a backend would store each one for the whole backward)."""

import operator

import torch
import torch.fx as fx
from helpers import aot_module_recording_partitions
from torch import nn

from danlu_aotautograd.partition.graph_split import sink_recomputes

aten = torch.ops.aten


def _graph():
    g = fx.Graph()
    saved, tangent = g.placeholder("saved_0"), g.placeholder("tangents_0")
    recomputed = g.call_function(aten.relu.default, (saved,))
    also = g.call_function(aten.mul.Tensor, (recomputed, 2.0))
    noise = g.call_function(aten.rand_like.default, (saved,))  # random: keeps its place
    g1 = g.call_function(aten.mul.Tensor, (tangent, 3.0))
    g2 = g.call_function(aten.add.Tensor, (g1, noise))
    g3 = g.call_function(aten.mul.Tensor, (g2, also))
    g4 = g.call_function(aten.mul.Tensor, (g3, recomputed))
    g.output((g4,))
    return g


def test_recomputes_move_to_their_first_user_in_order():
    g = _graph()
    before = [n.name for n in g.nodes]
    assert sink_recomputes(g) > 0
    names = [n.name for n in g.nodes]
    g.lint()  # still topologically ordered
    assert sorted(names) == sorted(before)
    # relu and its product come right before the first gradient op that reads them
    first_use = names.index("mul_tensor_2")  # g3, the first gradient op reading them
    assert names.index("relu_default") == first_use - 2
    assert names.index("mul_tensor") == first_use - 1
    # everything else (the random op included) keeps its order
    moved = {"relu_default", "mul_tensor"}
    assert [n for n in names if n not in moved] == [n for n in before if n not in moved]
    assert names.index("rand_like_default") < names.index("mul_tensor_1")
    assert sink_recomputes(g) == 0  # already in place


class Stack(nn.Module):
    def __init__(self, width=32, layers=3):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for lin in self.lins:
            x = torch.tanh(lin(torch.relu(x) * 1.5))
        return x.square().mean()


def test_min_cut_backward_places_recomputes_late_and_gradients_match():
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model, ref = Stack(), Stack()
    ref.load_state_dict(model.state_dict())
    compiled, partitions = aot_module_recording_partitions(model)
    x = torch.randn(5, 8, 32).transpose(0, 1).requires_grad_()  # non-contiguous
    x_ref = x.detach().clone().requires_grad_()
    compiled(x).backward()
    ref(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-7)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)

    (partition,) = partitions
    nodes = list(partition.backward.graph.nodes)
    tangents = {n for n in nodes if n.op == "placeholder" and n.name.startswith("tangents")}
    reached = set(tangents)
    for n in nodes:
        if n.op != "placeholder" and any(a in reached for a in n.all_input_nodes):
            reached.add(n)
    recomputed = [
        n
        for n in nodes
        if n.op == "call_function" and n not in reached and n.target is not operator.getitem
    ]
    assert recomputed, "the min-cut partition recomputes the relu/scale chain"
    first_grad = next(i for i, n in enumerate(nodes) if n in reached and n.op != "placeholder")
    late = [n for n in recomputed if nodes.index(n) > first_grad]
    assert late, [n.format_node() for n in recomputed]
    for n in recomputed:  # each followed by a user of its own or another recomputed op
        nxt = nodes[nodes.index(n) + 1]
        assert nxt in n.users or nxt in recomputed, (n.format_node(), nxt.format_node())
