"""Python int arguments under dynamic shapes: automatic dynamic turns an int whose value
changed into a symbolic graph input, dynamic=True from the first trace, dynamic=False never;
small values, attributes and Python-level uses that need a number stay specialised."""

import pytest
import torch
from test_dynamic_capture import Counter, capture_path  # noqa: F401 (a fixture)

import danlu_dynamo


def _int_placeholders(graph):
    gm, _example_inputs = graph  # as Counter keeps it
    return [
        n
        for n in gm.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.SymInt)
    ]


def _f(x, n):
    y = x[:, :n] * n
    return y.sum(1) / n, n + 1  # the int returned is rebuilt from L['n'], not baked in


@pytest.mark.usefixtures("capture_path")  # both capture paths
def test_changed_int_becomes_a_symbolic_input():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(_f)
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(5, 32, generator=gen)
    for n in (3, 7, 2, 16, 9, 7, 31):
        out, m = opt(x, n)
        ref, rm = _f(x, n)
        torch.testing.assert_close(out, ref)
        assert m == rm and type(m) is int
    assert be.n == 2
    assert _int_placeholders(be.graphs[0]) == []
    assert len(_int_placeholders(be.graphs[1])) == 1


def test_dynamic_true_and_false():
    x = torch.randn(4, 40)
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=True)(_f)
    for n in (3, 7, 12):
        torch.testing.assert_close(opt(x, n)[0], _f(x, n)[0])
    assert be.n == 1 and len(_int_placeholders(be.graphs[0])) == 1
    be = Counter()
    opt = danlu_dynamo.optimize(be, dynamic=False)(_f)
    for n in (3, 7, 12):
        torch.testing.assert_close(opt(x, n)[0], _f(x, n)[0])
    assert be.n == 3 and not any(_int_placeholders(g) for g in be.graphs)


def test_small_and_negative_ints_stay_constants():
    be = Counter()
    opt = danlu_dynamo.optimize(be)(lambda x, k: x * k + k)
    x = torch.randn(3)
    for k in (5, 1, 0, -3):
        torch.testing.assert_close(opt(x, k), x * k + k)
    assert not any(_int_placeholders(g) for g in be.graphs[1:])
    assert be.n == 4


def test_branch_on_an_int_recompiles_only_when_crossing():
    def f(x, n):
        return x * 2 if n > 16 else x * 3 + n

    be = Counter()
    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(4)
    for n in (4, 5, 6, 20, 30, 7, 16, 17):
        torch.testing.assert_close(opt(x, n), f(x, n))
    # 4: static; 5: symbolic with n <= 16; 20: symbolic with n > 16; the rest hit
    assert be.n == 3


def test_attribute_ints_stay_static():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 3

        def forward(self, x):
            return x * self.k

    m, be = M(), Counter()
    opt = danlu_dynamo.optimize(be)(m)
    x = torch.randn(4)
    for k in (3, 4, 5):
        m.k = k
        torch.testing.assert_close(opt(x), x * k)
    assert be.n == 3 and not any(_int_placeholders(g) for g in be.graphs)


def test_range_over_an_int_specialises_it():
    def f(x, n):
        for _ in range(n):
            x = x + 1
        return x

    be = Counter()
    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(3)
    for n in (2, 3, 4, 3):
        torch.testing.assert_close(opt(x, n), f(x, n))
    assert be.n == 3  # one graph per value: range() needs the number


def test_recompile_reason_names_the_int():
    opt = danlu_dynamo.optimize(Counter())(lambda x, n: x * n)
    x = torch.randn(2)
    opt(x, 3)
    opt(x, 4)
    (why,) = opt._capture_ctx.recompiles
    assert "L['n']: 3 -> 4, made dynamic" in why
    assert "CONSTANT_MATCH" in why


def test_size_live_at_a_graph_break_becomes_symbolic_in_the_resume_function(capsys):
    def f(x):
        n = x.shape[0]
        y = x * 2
        print("graph break")
        return y.view(n, -1) * n

    be = Counter()
    opt = danlu_dynamo.optimize(be)(f)
    for b in (3, 4, 5, 6, 7):
        x = torch.randn(b, 4)
        torch.testing.assert_close(opt(x), f(x))
    # static: the frame and its resume function; then one symbolic version of each
    assert be.n == 4
    assert len(_int_placeholders(be.graphs[3])) == 1
