"""The loop-IR checker (ir/verify.py): well-formed graphs pass, and each check catches a
deliberately broken IR (an index out of range, a read before its write, a dtype mismatch)."""

from __future__ import annotations

import pytest
import sympy
import torch
from helpers import aten_graph

from danlu_inductor import compile_fx, validate_options
from danlu_inductor.graph import GraphLowering
from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.layout import FixedLayout
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import FloorDiv, IMod, size_hints, sym
from danlu_inductor.ir.verify import IRVerificationError, bounds, verify_graph
from danlu_inductor.scheduler import Scheduler

aten = torch.ops.aten
f32, f64, i64 = torch.float32, torch.float64, torch.int64


def lower(fn, *args):
    gm = aten_graph(fn, *args)
    graph = GraphLowering(gm, list(args)).run()
    with size_hints(graph.hint_values()):
        sched = Scheduler(graph)
    return graph, sched


def verify(graph, sched=None):
    with size_hints(graph.hint_values()):
        return verify_graph(graph, sched)


def computed(graph):
    return [b for b in graph.buffers if isinstance(b, ir.ComputedBuffer)]


def pointwise_graph():
    """x (4, 5) -> x * 2, one Pointwise buffer reading input ``name``."""
    graph, sched = lower(lambda x: x * 2, torch.randn(4, 5))
    (buf,) = computed(graph)
    return graph, sched, buf, graph.graph_input_names[0]


# ------------------------------------------------------------------------ bounds


def test_bounds_affine_and_index_functions():
    x0, x1 = sym("x0"), sym("x1")
    r = {x0: (0, 3), x1: (0, 4)}
    assert bounds(5 * x0 + x1, r) == (0, 19)
    assert bounds(7 - x1, r) == (3, 7)
    assert bounds(FloorDiv(5 * x0 + x1, 3), r) == (0, 6)
    assert bounds(IMod(x1, 3), r) == (0, 2)
    assert bounds(IMod(x1, 9), r) == (0, 4)  # dividend below the modulus: kept
    assert bounds(sympy.Max(x1 - 2, 0), r) == (0, 2)
    assert bounds(sympy.Symbol("q", integer=True), r) is None  # unknown symbol


# ---------------------------------------------------------------- well-formed graphs


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda x: torch.softmax(x, -1), [torch.randn(6, 7)]),
        (lambda x, i: x[i].t() + 1, [torch.randn(5, 3), torch.tensor([4, 0, -1])]),
        (lambda a, b: torch.cat([a, b.t()], 1).sum(0), [torch.randn(3, 2), torch.randn(4, 3)]),
        (lambda x: torch.nn.functional.pad(x, (1, 2)) * 3, [torch.randn(2, 3)]),
        (lambda x: x.reshape(3, 4, 2).permute(2, 0, 1)[:, 1:].exp(), [torch.randn(6, 4)]),
        (lambda x, w: torch.relu(x @ w + 1).mean(), [torch.randn(4, 3), torch.randn(3, 5)]),
        (lambda x: x.argmax(-1) + x.to(torch.int32).sum(-1), [torch.randn(3, 8)]),
    ],
)
def test_well_formed_graphs_pass(fn, args):
    graph, sched = lower(fn, *args)
    report = verify(graph, sched)
    assert report.bodies >= 1 and report.accesses >= 2
    assert report.skipped == []


def test_strided_input_view_of_a_storage_passes():
    base = torch.randn(64)
    x = base[3:43].view(5, 8)[:, ::2]  # offset 3 in its storage, strides (8, 2)
    graph, sched = lower(lambda x: x.as_strided([3, 4], [1, 3], 5) * 2, x)
    assert verify(graph, sched).accesses >= 2


# ------------------------------------------------------------------ index ranges


def test_load_out_of_range_is_caught():
    graph, sched, buf, x = pointwise_graph()
    buf.data.inner_fn = lambda i: ops.mul(ops.load(x, 5 * i[0] + i[1] + 1), ops.constant(2.0, f32))
    with pytest.raises(IRVerificationError) as e:
        verify(graph, sched)
    msg = str(e.value)
    assert f"buffer {buf.get_name()}" in msg and f"'{x}'" in msg
    assert "5*x0 + x1 + 1" in msg and "reaches [1, 20]" in msg and "spans [0, 19]" in msg
    assert "x0 in [0, 3], x1 in [0, 4]" in msg


def test_negative_load_index_is_caught():
    graph, sched, buf, x = pointwise_graph()
    buf.data.inner_fn = lambda i: ops.mul(ops.load(x, 5 * i[0] + i[1] - 2), ops.constant(2.0, f32))
    with pytest.raises(IRVerificationError, match=r"reaches \[-2, 17\]"):
        verify(graph, sched)


def test_non_affine_index_is_enumerated_not_flagged():
    graph, sched, buf, x = pointwise_graph()
    # the interval of 4*(x1 // 4) + x1 % 4 is [0, 7], its values 0..4: exact evaluation decides
    idx = lambda i: 5 * i[0] + 4 * FloorDiv(i[1], 4) + IMod(i[1], 4)  # noqa: E731
    buf.data.inner_fn = lambda i: ops.mul(ops.load(x, idx(i)), ops.constant(2.0, f32))
    report = verify(graph, sched)
    assert report.enumerated >= 1 and report.skipped == []


def test_non_affine_index_out_of_range_is_caught():
    graph, sched, buf, x = pointwise_graph()
    idx = lambda i: 5 * i[0] + IMod(i[1] + 3, 7)  # noqa: E731  (x1 = 3 reads element 6 of 5)
    buf.data.inner_fn = lambda i: ops.mul(ops.load(x, idx(i)), ops.constant(2.0, f32))
    with pytest.raises(IRVerificationError, match=r"reaches \[0, 21\] .* spans \[0, 19\]"):
        verify(graph, sched)


def test_non_affine_index_over_too_many_points_is_skipped_and_said():
    graph, sched = lower(lambda x: x * 2, torch.randn(300, 300))
    (buf,) = computed(graph)
    x = graph.graph_input_names[0]
    idx = lambda i: IMod(300 * i[0] + i[1] + 7, 90001)  # noqa: E731
    buf.data.inner_fn = lambda i: ops.mul(ops.load(x, idx(i)), ops.constant(2.0, f32))
    report = verify(graph, sched)
    assert len(report.skipped) == 1 and "non-affine" in report.skipped[0]


def test_loop_ranges_must_match_the_layout():
    graph, sched, buf, _ = pointwise_graph()
    buf.layout = FixedLayout(f32, [4, 4], [4, 1])
    with pytest.raises(IRVerificationError, match=r"loop ranges \[4, 5\] differ .* \[4, 4\]"):
        verify(graph, sched)


def test_view_passed_to_a_library_call_out_of_range_is_caught():
    graph, sched = lower(lambda x, w: x.t() @ w, torch.randn(4, 3), torch.randn(4, 2))
    (mm,) = [b for b in graph.buffers if isinstance(b, ir.ExternKernel)]
    view = mm.args[0]
    assert isinstance(view, ir.ReinterpretView)
    verify(graph, sched)
    view.layout = FixedLayout(f32, [3, 4], [1, 3], 1)  # one element past the input
    with pytest.raises(IRVerificationError, match=r"view of .* reaches \[1, 12\]"):
        verify(graph, sched)


def test_fused_member_index_outside_its_ranges_is_caught():
    graph, sched = lower(lambda x: torch.softmax(x, -1), torch.randn(6, 7))
    (group,) = [g for g in sched.groups if not g.is_extern]
    node = group.nodes[-1]
    orig = node.index_in_kernel
    node.index_in_kernel = lambda *a: ([e + 1 for e in orig(*a)[0]], orig(*a)[1])
    with pytest.raises(IRVerificationError, match=rf"member {node.name} .* outside its range"):
        verify(graph, sched)


# -------------------------------------------------------------- defined before use


def test_load_of_an_unknown_buffer_is_caught():
    graph, sched, buf, _ = pointwise_graph()
    buf.data.inner_fn = lambda i: ops.load("nowhere", i[1])
    with pytest.raises(IRVerificationError, match="'nowhere', which is no graph input"):
        verify(graph, sched)


def test_read_before_write_in_schedule_order_is_caught():
    graph, sched = lower(lambda x, w: (x @ w) + 1, torch.randn(4, 3), torch.randn(3, 5))
    assert [g.is_extern for g in sched.groups] == [True, False]
    verify(graph, sched)
    sched.groups.reverse()
    with pytest.raises(IRVerificationError, match="before it is computed"):
        verify(graph, sched)


def test_library_call_reading_a_later_buffer_is_caught():
    graph, sched = lower(lambda x, w: (x + 1) @ w, torch.randn(4, 3), torch.randn(3, 5))
    assert [g.is_extern for g in sched.groups] == [False, True]
    sched.groups.reverse()
    with pytest.raises(IRVerificationError, match=r"library call .*mm.* before it is computed"):
        verify(graph, sched)


def test_argmax_into_a_float_buffer_is_caught():
    graph, sched = lower(lambda x: x.argmax(-1), torch.randn(4, 6))
    (buf,) = computed(graph)
    verify(graph, sched)
    buf.data.dtype = f32
    buf.layout = FixedLayout(f32, buf.layout.size, buf.layout.stride)
    with pytest.raises(IRVerificationError, match="argmax into float32"):
        verify(graph, sched)


def test_reduction_read_inside_its_own_loop_is_caught():
    graph, sched = lower(lambda x: torch.softmax(x, -1), torch.randn(6, 7))
    (group,) = sched.groups
    assert len(group.phases) > 1
    verify(graph, sched)
    group.phases = [("r", [n for _, members in group.phases for n in members])]
    with pytest.raises(IRVerificationError, match="inside the loop that computes it"):
        verify(graph, sched)


def test_graph_output_never_computed_is_caught():
    graph, sched = lower(lambda x, w: (x @ w, x + 1), torch.randn(3, 3), torch.randn(3, 2))
    assert len(sched.groups) == 2
    sched.groups = [g for g in sched.groups if g.is_extern]
    with pytest.raises(IRVerificationError, match="never computed"):
        verify(graph, sched)


# ------------------------------------------------------------------------ dtypes


def _broken_body(body):
    graph, sched, buf, x = pointwise_graph()
    buf.data.inner_fn = lambda i: body(lambda: ops.load(x, 5 * i[0] + i[1]))
    return graph, sched


@pytest.mark.parametrize(
    "body, message",
    [
        (lambda v: ops.to_dtype(v(), f64), "stores a float64 value into a float32 buffer"),
        (lambda v: ops.add(v(), ops.constant(1.0, f64)), "ops.add of float32 and float64"),
        (lambda v: ops.where(v(), v(), v()), "ops.where with a float32 condition"),
        (
            lambda v: ops.where(ops.gt(v(), v()), v(), ops.constant(0, i64)),
            "chooses between float32 and int64",
        ),
        (lambda v: ops.to_dtype(ops.exp(ops.to_dtype(v(), i64)), f32), "ops.exp of int64"),
        (lambda v: ops.bitwise_and(v(), v()), "ops.bitwise_and of float32"),
        (lambda v: ops.to_dtype(ops.logical_and(v(), v()), f32), "ops.logical_and of float32"),
        (lambda v: 1.0, "not a value of the body"),
    ],
)
def test_dtype_mismatches_are_caught(body, message):
    graph, sched = _broken_body(body)
    with pytest.raises(IRVerificationError, match=message):
        verify(graph, sched)


def test_indirect_index_from_a_float_is_caught():
    graph, sched = lower(lambda x, i: x[i], torch.randn(5, 3), torch.tensor([1, 2]))
    verify(graph, sched)
    (buf,) = computed(graph)
    x, idx = graph.graph_input_names
    buf.data.inner_fn = lambda i: ops.load(
        x, 3 * ops.indirect_indexing(ops.to_dtype(ops.load(idx, i[0]), f32), 5) + i[1]
    )
    with pytest.raises(IRVerificationError, match="indirect_indexing of a float32 value"):
        verify(graph, sched)


def test_reduction_value_must_have_its_src_dtype():
    graph, sched = lower(lambda x: x.sum(-1), torch.randn(4, 6))
    (buf,) = computed(graph)
    inner = buf.data.inner_fn
    buf.data.inner_fn = lambda i, r: ops.to_dtype(inner(i, r), f64)
    with pytest.raises(IRVerificationError, match="reduces float64 values but declares src"):
        verify(graph, sched)


# ------------------------------------------------------------------ how it is run


def test_option_and_environment(monkeypatch):
    x = torch.randn(4, 5)
    gm = aten_graph(lambda x: (x * 2).sum(0), x)
    monkeypatch.setenv("DANLU_VERIFY_IR", "0")
    assert compile_fx(gm, [x]).scheduler.verify_report is None
    report = compile_fx(gm, [x], options={"verify_ir": True}).scheduler.verify_report
    assert report is not None and report.bodies >= 1
    monkeypatch.setenv("DANLU_VERIFY_IR", "1")
    assert compile_fx(gm, [x]).scheduler.verify_report is not None
    with pytest.raises(ValueError, match="verify_ir"):
        validate_options({"verify_ir": "yes"})


def test_a_broken_lowering_fails_the_compile(monkeypatch):
    from danlu_inductor.lowering import LOWERINGS

    def bad_exp(x):  # reads one element past the end of its input
        load = x.make_loader()
        n = x.get_size()[0]
        return ir.StorageBox(ir.Pointwise(f32, [n], lambda i: ops.exp(load([i[0] + 1]))))

    monkeypatch.setitem(LOWERINGS, aten.exp.default, bad_exp)
    x = torch.randn(8)
    gm = aten_graph(torch.exp, x)
    with pytest.raises(IRVerificationError, match=r"reaches \[1, 8\] .* spans \[0, 7\]"):
        compile_fx(gm, [x], options={"verify_ir": True})


def test_symbolic_graph_is_checked_at_its_hints():
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    x = torch.randn(6, 5)
    gm = trace(
        lambda x: torch.softmax(x * 2, -1), x, decompositions=decomposition_table(), dynamic=True
    )
    compiled = compile_fx(gm, [x], options={"verify_ir": True})
    assert compiled.report["dynamic"]
    assert compiled.scheduler.verify_report.accesses >= 3
    torch.testing.assert_close(compiled(x), torch.softmax(x * 2, -1))
