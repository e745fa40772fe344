"""The scheduler on small hand-built graphs: which buffers share a kernel, where each member
sits in it ("x", "xr", "reduction"), its loops (phases), and the kernel order, asserted on
the scheduler's own structure (not on the kernel count of a compiled graph)."""

from __future__ import annotations

import pytest
import torch
from ir_eval import LoweringContext

from danlu_inductor.ir import nodes as ir
from danlu_inductor.lowering import LOWERINGS
from danlu_inductor.scheduler import Scheduler
from danlu_inductor.scheduler import scheduler as scheduler_mod

aten = torch.ops.aten


def L(op):
    return LOWERINGS[op]


def schedule(build, *tensors):
    """Lower ``build(*input boxes) -> outputs`` and schedule it; -> (graph, scheduler)."""
    ctx = LoweringContext(*tensors)
    with ctx as (graph, boxes):
        outs = build(*boxes)
        graph.graph_outputs = [ir.realize_input(o) for o in outs]
        sched = Scheduler(graph)
    return graph, sched


def group_of(sched):
    return {n.name: i for i, g in enumerate(sched.groups) for n in g.nodes}


def assert_topological(sched):
    where = group_of(sched)
    for i, g in enumerate(sched.groups):
        for n in g.nodes:
            for d in n.deps:
                assert where[d] <= i, f"{n.name} (kernel {i}) runs before its input {d}"
                if where[d] == i and not g.is_extern:
                    # inside a kernel: the producer's loop comes first
                    phase = {m.name: k for k, (_, ms) in enumerate(g.phases) for m in ms}
                    assert phase[d] <= phase[n.name]


def realized(box):
    box.realize()
    return box


def test_softmax_is_one_kernel_with_three_loops():
    x = torch.randn(6, 7)
    graph, sched = schedule(lambda x: [L(aten._softmax.default)(x, -1, False)], x)
    (g,) = sched.groups
    assert g.xsizes == [6] and g.rsizes == [7]
    kinds = {n.name: (n.is_reduction, g.placements[n.name]) for n in g.nodes}
    reductions = [n for n, (red, _) in kinds.items() if red]
    assert len(reductions) == 2 and all(kinds[n][1] == "reduction" for n in reductions)
    assert all(p == "xr" for n, (red, p) in kinds.items() if not red)
    # max, then exp and sum in one loop over the row, then the division: three loops
    assert [k for k, _ in g.phases] == ["r", "r", "r"]
    amax, total = sorted(reductions, key=lambda n: sched.name_to_node[n].order)
    assert [n.name for n in g.phases[0][1]] == [amax]
    assert total in [n.name for n in g.phases[1][1]]
    assert_topological(sched)


def test_shared_pointwise_producer_fuses_vertically_into_both_consumers():
    x = torch.randn(6, 7)

    def build(x):
        y = realized(L(aten.exp.default)(x))
        return [L(aten.add.Tensor)(y, 1), L(aten.mul.Tensor)(y, 2)]

    graph, sched = schedule(build, x)
    (g,) = sched.groups
    assert len(g.nodes) == 3 and set(g.placements.values()) == {"x"}
    assert g.phases == [("x", g.nodes)]
    assert [line.split(":")[0] for line in sched.fusion_log] == ["fuse vertical"] * 2


def test_transposed_read_of_a_buffer_is_not_fused():
    # z[i, j] = y[j, i] + y[i, j]: one kernel would read elements other iterations write
    def build(x):
        y = realized(L(aten.mul.Tensor)(x, 2))
        return [y, L(aten.add.Tensor)(L(aten.t.default)(y), y)]

    graph, sched = schedule(build, torch.randn(5, 5))
    assert len(sched.groups) == 2 and sched.fusion_log == []
    y, z = (b.get_name() for b in graph.graph_outputs)
    assert group_of(sched)[y] < group_of(sched)[z]
    merged = sched.can_fuse(sched.groups[0], sched.groups[1])
    assert merged is None


def test_sibling_reductions_share_one_loop():
    x = torch.randn(6, 7)
    graph, sched = schedule(
        lambda x: [L(aten.sum.dim_IntList)(x, [1]), L(aten.amax.default)(x, [1])], x
    )
    (g,) = sched.groups
    assert sched.fusion_log[0].startswith("fuse horizontal")
    assert len(g.phases) == 1 and g.phases[0][0] == "r" and len(g.phases[0][1]) == 2


def test_reduction_epilogue_runs_once_per_row():
    x, b = torch.randn(6, 7), torch.randn(6)
    graph, sched = schedule(
        lambda x, b: [L(aten.add.Tensor)(L(aten.sum.dim_IntList)(x, [1]), b)], x, b
    )
    (g,) = sched.groups
    red = [n for n in g.nodes if n.is_reduction]
    epi = [n for n in g.nodes if not n.is_reduction]
    assert g.placements[red[0].name] == "reduction" and g.placements[epi[0].name] == "x"
    assert [k for k, _ in g.phases] == ["r", "x"]


def test_library_call_between_two_loops_keeps_them_apart():
    # a -> mm(a) -> out, and a -> sum(a) -> out: fusing a's kernel with out's would put the
    # matmul inside a kernel (a cycle between kernels)
    def build(x, w):
        a = L(aten.add.Tensor)(x, 1)
        m = L(aten.mm.default)(a, w)
        return [L(aten.add.Tensor)(m, L(aten.sum.dim_IntList)(a, [1], True))]

    graph, sched = schedule(build, torch.randn(6, 7), torch.randn(7, 7))
    kinds = ["extern" if g.is_extern else "loops" for g in sched.groups]
    assert kinds == ["loops", "extern", "loops"]
    first, mm, last = sched.groups
    assert any(n.is_reduction for n in first.nodes)  # a fused into the sum that reads it
    assert sched._cycle(first, last) and sched.can_fuse(first, last) is None
    assert_topological(sched)


def test_dead_buffers_are_removed():
    def build(x):
        realized(L(aten.exp.default)(x))  # computed, never read
        return [L(aten.mul.Tensor)(x, 2)]

    graph, sched = schedule(build, torch.randn(6, 7))
    dead = graph.buffers[0].get_name()
    assert f"removed dead buffer {dead}" in sched.fusion_log
    assert dead not in group_of(sched) and len(sched.groups) == 1


def test_fusion_size_limit(monkeypatch):
    monkeypatch.setattr(scheduler_mod, "MAX_FUSION_SIZE", 2)

    def build(x):
        y = x
        for _ in range(5):
            y = realized(L(aten.exp.default)(y))
        return [y]

    graph, sched = schedule(build, torch.randn(4, 4))
    assert all(len(g.nodes) <= 2 for g in sched.groups)
    assert len(sched.groups) == 3
    assert_topological(sched)


def test_different_iteration_spaces_do_not_fuse():
    def build(x):
        a = realized(L(aten.exp.default)(x))
        return [L(aten.sum.dim_IntList)(a, [0]), L(aten.sum.dim_IntList)(a, [1])]

    graph, sched = schedule(build, torch.randn(6, 7))
    by_group = group_of(sched)
    s0, s1 = (b.get_name() for b in graph.graph_outputs)
    # a column sum and a row sum reduce over different spaces: never one kernel
    assert by_group[s0] != by_group[s1]
    for g in sched.groups:
        for n in g.nodes:
            assert g.placements[n.name] is not None
    assert_topological(sched)


def test_kernel_order_follows_dependencies_on_a_diamond():
    def build(x, w):
        a = realized(L(aten.exp.default)(x))
        m1 = L(aten.mm.default)(a, w)
        m2 = L(aten.mm.default)(L(aten.t.default)(a), w)
        return [L(aten.add.Tensor)(m1, 1), m2]

    graph, sched = schedule(build, torch.randn(6, 6), torch.randn(6, 6))
    assert_topological(sched)
    names = [g.name for g in sched.groups]
    assert len(names) == len(set(names))


def test_topological_check_catches_a_wrong_order():
    # the helper above fails on a schedule that runs a consumer first
    x = torch.randn(6, 7)
    graph, sched = schedule(
        lambda x, w: [L(aten.add.Tensor)(L(aten.mm.default)(x, w), 1)], x, torch.randn(7, 3)
    )
    sched.groups.reverse()
    with pytest.raises(AssertionError, match="runs before its input"):
        assert_topological(sched)


def test_reshaped_read_of_a_value_written_in_the_kernel_fuses():
    # a row-wise result (a log-softmax gradient's row sums and the pointwise before them,
    # [16 | r 32]) read through a [2, 8, 32] view of the same buffer: the view's div/mod index
    # names the element the same iteration wrote, so it joins the reduction's kernel
    x = torch.randn(16, 32)

    def build(x):
        e = realized(L(aten.exp.default)(x))
        s = realized(L(aten.sum.dim_IntList)(e, [1], True))
        v = L(aten.view.default)(e, [2, 8, 32])
        return [L(aten.sub.Tensor)(v, L(aten.view.default)(s, [2, 8, 1]))]

    graph, sched = schedule(build, x)
    (g,) = sched.groups
    assert g.xsizes == [16] and g.rsizes == [32]
    assert_topological(sched)

    # and a view that reads other rows' elements still keeps its own kernel
    def build_shifted(x):
        e = realized(L(aten.exp.default)(x))
        s = realized(L(aten.sum.dim_IntList)(e, [1], True))
        rolled = L(aten.cat.default)(
            [L(aten.slice.Tensor)(e, 0, 1, 16), L(aten.slice.Tensor)(e, 0, 0, 1)], 0
        )  # row i reads row i + 1
        v = L(aten.view.default)(rolled, [2, 8, 32])
        return [L(aten.sub.Tensor)(v, L(aten.view.default)(s, [2, 8, 1]))]

    graph, sched = schedule(build_shifted, x)
    assert len(sched.groups) >= 2
    assert_topological(sched)


def _permuted_copy_beside(x):
    """[x + 1, (x * 3).permute(0, 2, 3, 1) as a contiguous buffer]: two loops of one numel
    whose dims regroup across each other ([2, 4, 6, 6] and [2, 6, 6, 4])."""
    y = L(aten.add.Tensor)(x, 1)
    p = L(aten.permute.default)(L(aten.mul.Tensor)(x, 3), [0, 2, 3, 1])
    return [y, L(aten.clone.default)(p, memory_format=torch.contiguous_format)]


def test_a_permuted_copy_does_not_join_a_kernel_by_flat_index():
    # fused by flat index, the copy's element i is x's element i of the other order: every
    # load of x divides and jumps; ConvNeXt's backward had such a kernel at 0.68 ms where the
    # two loops alone take 0.27 ms
    graph, sched = schedule(_permuted_copy_beside, torch.randn(2, 4, 6, 6))
    y, p = (b.get_name() for b in graph.graph_outputs)
    assert group_of(sched)[y] != group_of(sched)[p], sched.describe()
    assert sched.can_fuse(*sched.groups) is None
    assert_topological(sched)


def test_a_permuted_copy_of_a_channels_last_input_joins_by_flat_index():
    # the same pair over a channels-last x: the NHWC copy's flat order is x's memory order,
    # so the flat-index match walks memory in order and the loops stay one kernel
    x = torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last)
    graph, sched = schedule(_permuted_copy_beside, x)
    (g,) = sched.groups
    assert set(g.placements.values()) == {"x"}


def test_a_flat_view_still_joins_a_kernel_of_another_shape():
    # [x + 1, (x * 2).view(2, 6, 6, 4)]: the view walks x's memory in the kernel's order, so
    # the flat-index match costs no division and the two loops stay one kernel
    def build(x):
        return [
            L(aten.add.Tensor)(x, 1),
            L(aten.mul.Tensor)(L(aten.view.default)(x, [2, 6, 6, 4]), 2),
        ]

    graph, sched = schedule(build, torch.randn(2, 4, 6, 6))
    (g,) = sched.groups
    assert set(g.placements.values()) == {"x"}


def _swiglu_backward(g, u, grad_out, w_down):
    # the down projection's weight gradient reads a recomputed silu(g) * u; the gradients of
    # g and u read the same g and u
    s = L(aten.sigmoid.default)(g)
    gs = L(aten.mul.Tensor)(g, s)
    h = L(aten.mul.Tensor)(gs, u)
    gw = L(aten.mm.default)(L(aten.permute.default)(grad_out, [1, 0]), h)
    grad_h = L(aten.mm.default)(grad_out, w_down)
    grad_u = L(aten.mul.Tensor)(grad_h, gs)
    one_minus = L(aten.rsub.Scalar)(s, 1)
    dsilu = L(aten.mul.Tensor)(s, L(aten.add.Tensor)(L(aten.mul.Tensor)(g, one_minus), 1))
    grad_g = L(aten.mul.Tensor)(L(aten.mul.Tensor)(grad_h, u), dsilu)
    return [gw, grad_u, grad_g]


def test_matmuls_order_freely_so_a_recompute_joins_its_sibling_kernel():
    """Matmuls keep no order among library calls of their own (their inputs still order
    them): the recomputed silu(g) * u of a SwiGLU backward joins the kernel that computes
    the gradients of g and u from the same two tensors (one read of them, one launch), and
    the weight-gradient matmul that reads the product runs after that kernel."""
    args = (torch.randn(16, 24), torch.randn(16, 24), torch.randn(16, 8), torch.randn(8, 24))
    graph, sched = schedule(_swiglu_backward, *args)
    loops = [g for g in sched.groups if not g.is_extern]
    assert len(loops) == 1, sched.describe()
    gw, grad_u, grad_g = (b.get_name() for b in graph.graph_outputs)
    where = group_of(sched)
    (kernel,) = loops
    mm_after = [g for g in sched.groups if g.is_extern and gw in g.names]
    assert mm_after and where[gw] > sched.groups.index(kernel), sched.describe()
    assert_topological(sched)


def test_library_calls_with_effects_keep_their_order():
    # a matmul writing in place, or an op outside the order-free set (random numbers, side
    # effects, a fallback), keeps its place among the calls that keep theirs
    class Call:
        def __init__(self, op, mutates=()):
            self.op, self.mutates = op, list(mutates)

    keeps = scheduler_mod._keeps_call_order
    assert not keeps(Call(aten.mm.default)) and not keeps(Call(aten.convolution.default))
    assert keeps(Call(aten.mm.default, ["buf3"]))
    assert keeps(Call(aten.bernoulli.default)) and keeps(Call(aten.index_put_.default))
    assert keeps(Call(None))
