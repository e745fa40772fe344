"""Dynamic shapes in capture: symbolic sizes in the graph, automatic dynamic, dynamic=True/False,
mark_dynamic/mark_static, shape guards, and the reasons logged for recompiles."""

import logging

import pytest
import torch

import danlu_dynamo
from danlu_dynamo import config


class Counter:
    """A backend that counts compiles and keeps the graphs (runs them as they are)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append((gm, list(example_inputs)))
        return gm.forward

    @property
    def n(self):
        return len(self.graphs)


@pytest.fixture(params=["bytecode", "segments"])
def capture_path(request, monkeypatch):
    monkeypatch.setattr(config, "capture_path", request.param)
    return request.param


def _symbolic_dims(t):
    return [i for i, s in enumerate(t.shape) if isinstance(s, torch.SymInt)]


def test_automatic_dynamic_compiles_twice(capture_path):
    be = Counter()

    def f(x, w):
        b, t = x.shape[0], x.shape[1]
        return (x.reshape(b * t, -1) @ w).view(b, t, -1)

    opt = danlu_dynamo.optimize(be)(f)
    w = torch.randn(6, 3)
    for b, t in [(2, 5), (3, 7), (4, 9), (5, 2), (8, 11), (3, 7)]:
        x = torch.randn(b, t, 6)
        torch.testing.assert_close(opt(x, w), f(x, w))
    assert be.n == 2
    static, dynamic = be.graphs[0][0], be.graphs[1][0]
    ph = [n for n in static.graph.nodes if n.op == "placeholder"]
    assert _symbolic_dims(ph[0].meta["val"]) == []
    ph = [n for n in dynamic.graph.nodes if n.op == "placeholder"]
    assert _symbolic_dims(ph[0].meta["val"]) == [0, 1]
    assert _symbolic_dims(ph[1].meta["val"]) == []  # w never changed: stays static
    assert ph[0].meta["example_value"] is ph[0].meta["val"]
    # the sizes are computed in the graph, not baked in
    sizes = [n for n in dynamic.graph.nodes if n.op == "call_method" and n.target == "size"]
    assert len(sizes) == 2
    # backends get real example inputs
    assert all(type(x) is torch.Tensor for x in be.graphs[1][1])


def test_only_the_changing_dim_becomes_dynamic():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(lambda x: x.sum(0))
    for n in (3, 4, 5, 6):
        x = torch.randn(n, 7)
        torch.testing.assert_close(opt(x), x.sum(0))
    assert be.n == 2
    ph = next(n for n in be.graphs[1][0].graph.nodes if n.op == "placeholder")
    assert _symbolic_dims(ph.meta["val"]) == [0]
    # the other dim is still guarded: a new size there recompiles once more
    x = torch.randn(4, 9)
    torch.testing.assert_close(opt(x), x.sum(0))
    assert be.n == 3
    x = torch.randn(5, 10)
    torch.testing.assert_close(opt(x), x.sum(0))
    assert be.n == 3


def test_dynamic_true_is_symbolic_from_the_start(capture_path):
    be = Counter()

    def f(x):
        return x.view(-1, x.shape[-1]).softmax(-1) * x.shape[0]

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for shape in [(3, 4), (5, 6), (7, 2), (2, 9)]:
        x = torch.randn(shape)
        torch.testing.assert_close(opt(x), f(x))
    assert be.n == 1
    ph = next(n for n in be.graphs[0][0].graph.nodes if n.op == "placeholder")
    assert _symbolic_dims(ph.meta["val"]) == [0, 1]


def test_dynamic_false_always_specialises(capture_path):
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=False)(lambda x: x * 2)
    for n in (2, 3, 4, 5):
        x = torch.randn(n)
        torch.testing.assert_close(opt(x), x * 2)
    assert be.n == 4
    for gm, _ in be.graphs:
        ph = next(n for n in gm.graph.nodes if n.op == "placeholder")
        assert _symbolic_dims(ph.meta["val"]) == []


def test_sizes_0_and_1_stay_specialised():
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=True)(lambda x: x + x.shape[0])
    for n in (3, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(opt(x), x + n)
    assert be.n == 1
    x = torch.randn(1, 2)
    torch.testing.assert_close(opt(x), x + 1)
    assert be.n == 2  # size 1 broadcasts: its own entry
    x = torch.randn(6, 2)
    torch.testing.assert_close(opt(x), x + 6)
    assert be.n == 2


def test_branch_on_size_recompiles_only_when_crossing(capture_path):
    be = Counter()

    def f(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for n, expected in [(4, 1), (8, 1), (16, 1), (17, 2), (30, 2), (3, 2), (16, 2), (40, 2)]:
        x = torch.randn(n, 3)
        torch.testing.assert_close(opt(x), f(x))
        assert be.n == expected, (n, be.n)


def test_branch_guard_with_automatic_dynamic(caplog):
    be = Counter()

    def f(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1

    opt = danlu_dynamo.optimize(be)(f)
    with caplog.at_level(logging.INFO, logger="danlu_dynamo.recompiles"):
        for n in (4, 8, 12, 16):  # static, then dynamic with the guard size(0) <= 16
            x = torch.randn(n, 3)
            torch.testing.assert_close(opt(x), f(x))
        assert be.n == 2
        for n in (20, 24, 17):  # crossing 16: once more
            x = torch.randn(n, 3)
            torch.testing.assert_close(opt(x), f(x))
        assert be.n == 3
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "L['x'].size(0): 4 -> 8, made dynamic" in text
    assert "L['x'].size(0) <= 16" in text  # the guard that failed when crossing


def test_explain_lists_recompile_reasons():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(lambda x: x.cos())
    opt(torch.randn(3))
    opt(torch.randn(5))
    (why,) = opt._capture_ctx.recompiles
    assert "L['x'].size(0): 3 -> 5, made dynamic" in why
    assert "TENSOR_MATCH" in why


def test_mark_dynamic_and_mark_static():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(lambda x: x.sum(1))
    x = torch.randn(4, 6)
    danlu_dynamo.mark_dynamic(x, 1)
    torch.testing.assert_close(opt(x), x.sum(1))
    ph = next(n for n in be.graphs[0][0].graph.nodes if n.op == "placeholder")
    assert _symbolic_dims(ph.meta["val"]) == [1]
    for m in (3, 9):  # a new size of dim 1 hits the first entry
        y = torch.randn(4, m)
        torch.testing.assert_close(opt(y), y.sum(1))
    assert be.n == 1

    be2 = Counter()
    opt2 = danlu_dynamo.optimize(be2, dynamic=True)(lambda x: x.sum(1))
    x = torch.randn(4, 6)
    danlu_dynamo.mark_static(x, 0)
    opt2(x)
    ph = next(n for n in be2.graphs[0][0].graph.nodes if n.op == "placeholder")
    assert _symbolic_dims(ph.meta["val"]) == [1]


def test_mark_static_wins_over_automatic_dynamic():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(lambda x: x * 3)
    for n in (2, 3, 4):
        x = torch.randn(n)
        danlu_dynamo.mark_static(x)
        torch.testing.assert_close(opt(x), x * 3)
    assert be.n == 3


def test_reshape_with_shape_products_and_sizes_returned(capture_path):
    be = Counter()

    def f(x):
        b, c, h, w = x.shape
        y = x.reshape(b, c * h * w).relu()
        z = y.view(b * c, h * w).mean(-1)
        return z.view(b, c), b * c, x.size(-1) // 2, x.numel()

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for shape in [(2, 3, 4, 5), (3, 2, 6, 7), (4, 5, 2, 3)]:
        x = torch.randn(shape)
        got, exp = opt(x), f(x)
        torch.testing.assert_close(got[0], exp[0])
        assert got[1:] == exp[1:]
        assert all(type(v) is int for v in got[1:])
    assert be.n == 1
    # graphs return tensors only: sizes living on are computed from the inputs' sizes
    out = next(n for n in be.graphs[0][0].graph.nodes if n.op == "output")
    assert all(isinstance(a.meta["val"], torch.Tensor) for a in out.args[0])


def test_non_contiguous_inputs(capture_path):
    be = Counter()

    def f(x, y):
        return (x * 2 + y).sum(-1), x.shape[0] + y.shape[1]

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for n in (3, 5, 8):
        base = torch.randn(n, 2 * n + 1)
        x = base[:, ::2][:, :n]  # strided slice
        y = torch.randn(n, n).t()  # transposed
        got, exp = opt(x, y), f(x, y)
        torch.testing.assert_close(got[0], exp[0])
        assert got[1] == exp[1]
    x = torch.randn(4, 4)  # contiguous now: other strides, another entry
    got = opt(x, x)
    torch.testing.assert_close(got[0], (x * 2 + x).sum(-1))
    assert be.n == 2


def test_symbolic_slice_and_arange(capture_path):
    be = Counter()
    table = torch.randn(64, 4)

    def f(x):
        t = x.shape[1]
        pos = torch.arange(t)
        return x[:, : t - 1] + table[:t][pos][: t - 1, 0]

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for t in (3, 7, 12, 30):
        x = torch.randn(2, t)
        torch.testing.assert_close(opt(x), f(x))
    assert be.n == 1


def test_int_of_a_size_specialises_correctly():
    be = Counter()

    def f(x):
        n = int(x.shape[0])  # a Python int: this size is specialised (guarded)
        return x * n + len(range(x.shape[1]))

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for shape in [(3, 4), (3, 5), (4, 5)]:
        x = torch.randn(shape)
        torch.testing.assert_close(opt(x), f(x))
    for shape in [(3, 4), (4, 5)]:  # both seen: cache hits
        x = torch.randn(shape)
        torch.testing.assert_close(opt(x), f(x))
    assert be.n == 3


def test_data_dependent_sizes_break_the_graph():
    be = Counter()

    def f(x):
        y = x * 2
        idx = y.nonzero()
        z = y[y > 0]
        return idx.shape[0] + 1, z.sum() + y.sum()

    opt = danlu_dynamo.optimize(be, dynamic=True)
    report = danlu_dynamo.explain(f)(torch.randn(6, 3))
    assert report.graph_break_count >= 1
    g = opt(f)
    for n in (4, 6, 9):
        x = torch.randn(n, 3)
        got, exp = g(x), f(x)
        assert got[0] == exp[0]
        torch.testing.assert_close(got[1], exp[1])


def test_guards_show_shape_guards():
    be = Counter()

    def f(x):
        if x.shape[0] > 16:
            return x + 1
        return x

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    opt(torch.randn(20, 3))
    guards = str(opt._capture_ctx.records[-1].guards)
    assert "L['x'].size(0) > 16" in guards
    assert "2 <= L['x'].size(1)" in guards  # a range: sizes 0/1 are specialised
    assert "L['x'].dim() == 2" in guards


def test_duck_sizes_do_not_merge():
    # two inputs whose sizes happen to be equal keep separate symbols (no extra recompile
    # when they later differ)
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=True)(lambda x, y: x.sum() + y.sum())
    opt(torch.randn(4), torch.randn(4))
    opt(torch.randn(4), torch.randn(6))
    assert be.n == 1


def test_broadcast_equality_becomes_a_guard():
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=True)(lambda x, y: x + y)
    x, y = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(opt(x, y), x + y)
    x, y = torch.randn(7), torch.randn(7)
    torch.testing.assert_close(opt(x, y), x + y)
    assert be.n == 1
    with pytest.raises(RuntimeError):  # eager's own error: the guard sends it to a new trace
        opt(torch.randn(3), torch.randn(4))


def test_symbolic_shapes_keep_python_types():
    be = Counter()

    def f(x):
        s = x.shape
        kinds = isinstance(s, torch.Size), isinstance(s[1:], torch.Size), type(x.size(0))
        return x.view(s[0], -1) * 2, kinds, s[1:], x.size(), isinstance(s[0], int)

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for n in (3, 5, 8):
        x = torch.randn(n, 4, 2)
        got, exp = opt(x), f(x)
        torch.testing.assert_close(got[0], exp[0])
        assert got[1:] == exp[1:]
        assert type(got[2]) is torch.Size and type(got[3]) is torch.Size
    assert be.n == 1


def test_sources_in_closures_lists_and_kwargs(capture_path):
    be = Counter()
    outer = torch.randn(5, 3)

    def make():
        cell = outer

        def f(xs, *, scale):
            a, b = xs
            n = a.shape[0] + cell.shape[0]
            return torch.cat([a, b, cell]) * scale, n

        return f

    f = make()
    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for m in (2, 4, 7):
        xs = [torch.randn(m, 3), torch.randn(m + 1, 3)]
        got, exp = opt(xs, scale=2.0), f(xs, scale=2.0)
        torch.testing.assert_close(got[0], exp[0])
        assert got[1] == exp[1]
    assert be.n == 1


def test_size_live_at_a_graph_break(capture_path):
    be = Counter()

    def f(x):
        t = x.shape[0] * 2
        y = x.sin()
        print_ = str(y.sum().item())  # a graph break: t and y live across it
        return y + t, len(print_) > 0, t

    opt = danlu_dynamo.optimize(be, dynamic=True)(f)
    for n in (3, 6, 9):
        x = torch.randn(n, 2)
        got, exp = opt(x), f(x)
        torch.testing.assert_close(got[0], exp[0])
        assert got[1:] == exp[1:]
    assert opt._capture_ctx.breaks


def test_a_failing_symbolic_capture_falls_back_to_static(capture_path, caplog):
    # a backend that refuses graphs with symbolic sizes: the frame is traced again with
    # static sizes (logged), and the results stay right
    seen = []

    def picky(gm, example_inputs):
        ph = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
        symbolic = any(isinstance(s, torch.SymInt) for t in ph for s in t.shape)
        seen.append(symbolic)
        if symbolic:
            raise NotImplementedError("no symbolic sizes here")
        return gm.forward

    opt = danlu_dynamo.optimize(picky, dynamic=True)(lambda x: x.relu() + x.shape[0])
    with caplog.at_level(logging.INFO, logger="danlu_dynamo.recompiles"):
        for n in (3, 4):
            x = torch.randn(n, 2)
            torch.testing.assert_close(opt(x), x.relu() + n)
    assert seen == [True, False, True, False]
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "traced with static sizes" in text and "no symbolic sizes here" in text
    assert any("static sizes" in r for r in opt._capture_ctx.recompiles)


def test_storage_offset_of_a_symbolic_input_is_read_eagerly():
    opt = danlu_dynamo.optimize(Counter(), dynamic=True)(lambda x: x * 2 + x.storage_offset())
    base = torch.randn(40)
    for start, n in ((3, 5), (7, 9)):
        x = base[start : start + n]
        torch.testing.assert_close(opt(x), x * 2 + start)


def test_a_specialised_size_is_reported(caplog):
    be = Counter()

    def f(x):
        return x * len(range(x.shape[0]))  # range() needs a plain int

    opt = danlu_dynamo.optimize(be)(f)
    with caplog.at_level(logging.INFO, logger="danlu_dynamo.recompiles"):
        for n in (3, 4, 5):
            x = torch.randn(n)
            torch.testing.assert_close(opt(x), f(x))
    assert be.n == 3  # specialised again in the dynamic trace: one entry per size
    text = "\n".join(opt._capture_ctx.recompiles)
    assert "L['x'].size(0): 3 -> 4, made dynamic" in text
    assert "L['x'].size(0) specialised to 4 by the program" in text
    assert "Eq(L['x'].size(0), 4)" in text  # the guard that failed for 5
