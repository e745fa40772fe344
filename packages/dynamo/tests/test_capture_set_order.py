"""Sets iterate in eager's order (their hash-table order, which depends on what was inserted
and how), in the frame, after set operations, when rebuilt after the graph and when passed
in; the insertion order of the trace is not the iteration order."""

import string

import torch
from _containers_common import Counter, rand, run_both

import danlu_dynamo

WORDS = [a + b for a in string.ascii_lowercase[:6] for b in "xyz"]


def _x(gen):
    return (rand(gen, 2),)


def _order(s):
    return [repr(v) for v in s]


def test_iteration_order_of_sets_made_in_the_frame():
    def f(x):
        lit = {"pear", "fig", "apple", "kiwi", "plum", "date"}
        made = set(WORDS)
        made.add("zzz")
        made.add("apple")
        grown = set()
        for w in reversed(WORDS):
            grown.add(w)
        return (
            _order(lit),
            _order(made),
            _order(grown),
            _order(made | lit),
            _order(made & set(WORDS[::2])),
            _order(made - lit),
            _order(made ^ {"q", "fig"}),
            [w for w in grown if len(w) == 2][:5],
            x + 1,
        )

    for _ in range(3):
        run_both(f, _x, expect_graphs=1)


def test_returned_set_keeps_its_order():
    def f(x):
        s = set(WORDS[::-1])
        s.add("extra")
        return s, x * 2

    opt = danlu_dynamo.optimize(Counter())(f)
    got, _ = opt(torch.randn(2))
    exp, _ = f(torch.randn(2))
    assert list(got) == list(exp)


def test_input_set_iterates_in_its_own_order():
    def f(x, s):
        return [w for w in s], x + len(s)

    be = run_both(f, lambda g: (rand(g, 2), set(WORDS)), expect_graphs=1)
    opt = danlu_dynamo.optimize(be)(f)
    # an equal set with another insertion history may iterate in another order
    other = set(reversed(WORDS))
    for _ in range(20):
        other.add("tmp")
        other.discard("tmp")
    x = torch.randn(2)
    assert opt(x, other)[0] == f(x, other)[0]


def test_order_after_in_place_operations_methods_and_copies():
    def f(x, inp):
        s = {w for w in WORDS}
        s |= {"q1", "q2"}
        s -= set(WORDS[:5])
        s ^= {"ax", "new"}
        t = s.copy()
        t.update(["u1", "u2"], {"u3"})
        u = s.union(WORDS[3:9], {"v"})
        d = {w: 1 for w in reversed(WORDS)}
        k = d.keys() - {"ax"}
        inp.add("added")
        merged = inp | s
        return _order(s), _order(t), _order(u), _order(k), _order(inp), _order(merged), x + 1

    for _ in range(3):
        run_both(f, lambda g: (rand(g, 2), set(WORDS[::3])), expect_graphs=1)


def test_input_set_changed_in_the_frame_keeps_eager_order():
    def f(x, s):
        for w in reversed(WORDS):
            s.add(w + "!")
        s |= {"m1", "m2"}
        return x + 1

    opt = danlu_dynamo.optimize(Counter())(f)
    for _ in range(3):
        s_e, s_c = set(WORDS[::2]), set(WORDS[::2])
        x = torch.randn(2)
        torch.testing.assert_close(opt(x, s_c), f(x, s_e))
        assert list(s_c) == list(s_e)  # the same changes, in the same order
