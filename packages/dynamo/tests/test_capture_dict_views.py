"""dict.keys()/values()/items() are live views of the dict, not copies: membership, len,
equality, iteration, set operations and reversed see mutations made after the view was taken,
for dicts made in the frame and dicts passed in (whose mutations are replayed)."""

import collections

import pytest
import torch
from _containers_common import Counter, clone, rand, run_both

import danlu_dynamo


def _x(gen):
    return (rand(gen, 3, 4),)


def test_view_sees_keys_added_after_it_was_taken():
    def f(x):
        d = {1: x, 2: x * 2}
        k, v, it = d.keys(), d.values(), d.items()
        d[4] = x.sin()
        d[1] = x.cos()
        return 4 in k, len(k), len(v), len(it), (7, 1) in it, x + sum(v), list(k)

    run_both(f, _x, expect_graphs=1)


def test_view_sees_deletes_pop_clear_update():
    def f(x):
        d = {"a": x, "b": x + 1, "c": x + 2}
        k = d.keys()
        del d["a"]
        out = [("a" in k, len(k))]
        d.pop("b")
        d.update(z=x * 3, y=x)
        out.append((list(k), len(k)))
        vals = d.values()
        d.clear()
        out.append((len(vals), list(vals)))
        d["q"] = x
        return out, [t * 2 for t in vals]

    run_both(f, _x, expect_graphs=1)


def test_keys_equality_and_comparisons():
    def f(x):
        d = {"a": x, "b": x}
        d2 = {"b": 1, "a": 2}
        k = d.keys()
        r = [k == d2.keys(), k == {"a", "b"}, k != {"a"}, k == ["a", "b"], k <= {"a", "b", "c"}]
        r += [k < {"a", "b"}, k > {"a"}, {"a", "b"} == k, d.items() == {("a", 1)}]
        d2["c"] = 3
        r.append(k == d2.keys())
        v = d.values()
        r += [v == v, v == d.values()]
        return r, x * 2

    run_both(f, _x, expect_graphs=1)


def test_set_operations_on_keys_and_items():
    def f(x):
        d = {1: 10, 2: 20, 3: 30}
        e = {3: 30, 4: 40}
        k = d.keys()
        r = [k & {1, 5}, k | {9}, k - {2}, k ^ {1, 7}, k & e.keys(), k - e.keys()]
        r += [{2, 9} - k, [1, 8] & k, k | [7], d.items() & e.items(), d.items() - {(1, 10)}]
        r += [k.isdisjoint({8}), k.isdisjoint(e.keys())]
        d[7] = 70
        r.append(k & {7})  # the view, after the change
        k |= {100}  # a view has no |=: k is now a new set
        r.append(k)
        return r, x + len(d)

    run_both(f, _x, expect_graphs=1)


def test_iteration_and_reversed_follow_the_dict():
    def f(x):
        d = {"w": x, "v": x * 2}
        k, it = d.keys(), d.items()
        d["u"] = x * 3
        acc = x
        for name in k:
            acc = acc + d[name]
        for name, t in it:
            acc = acc * t if name == "v" else acc - t
        order = list(reversed(k)), list(reversed(d)), [n for n, _ in reversed(it)]
        return acc, order, sorted(k), dict(it), tuple(zip(k, d.values()))

    run_both(f, _x, expect_graphs=1)


def test_values_read_at_each_step_of_the_iteration():
    def f(x):
        d = {"a": x, "b": x + 1, "c": x + 2}
        out = []
        for name, v in d.items():  # assigning existing keys does not change the size
            d["c"] = v * 10
            out.append((name, v))
        return out, d

    run_both(f, _x, expect_graphs=1)


def test_input_dict_mutated_after_the_view_was_taken():
    def f(x, d):
        k, v = d.keys(), d.values()
        d["new"] = x * 2
        del d["a"]
        return "new" in k, "a" in k, len(v), x + sum(v), list(k)

    def inputs(gen):
        return rand(gen, 3), {"a": rand(gen, 3), "b": rand(gen, 3)}

    run_both(f, inputs, expect_graphs=1)


def test_returned_view_of_an_input_dict_stays_live():
    def f(x, d):
        d["y"] = x + 1
        return d.keys(), d.items(), x * 2

    opt = danlu_dynamo.optimize(Counter())(f)
    for _ in range(3):
        d = {"a": torch.randn(2)}
        k, it, _ = opt(torch.randn(2), d)
        assert type(k) is type({}.keys()) and type(it) is type({}.items())
        assert list(k) == ["a", "y"]
        d["later"] = 1  # made by the caller after the call: eager's view shows it
        assert "later" in k and len(it) == 3


def test_returned_view_of_a_new_dict():
    def f(x):
        d = {"p": x}
        v = d.values()
        d["q"] = x.exp()
        return v, d

    be = run_both(f, _x, expect_graphs=1)
    opt = danlu_dynamo.optimize(be)(f)
    v, d = opt(torch.randn(2))
    d["r"] = 1  # the view belongs to the returned dict
    assert len(v) == 3


def test_ordered_dict_views_and_move_to_end():
    def f(x):
        d = collections.OrderedDict(a=x, b=x + 1)
        k = d.keys()
        d["c"] = x * 2
        d.move_to_end("a")
        first = list(k)
        d.move_to_end("c", last=False)
        name, last = d.popitem()
        return first, list(k), name, last, list(reversed(d.values())), type(k).__name__

    run_both(f, _x, expect_graphs=1)


def test_dict_equality_and_merge_operators():
    def f(x):
        a = {"k": 1, "j": 2}
        b = {"j": 2, "k": 1}
        c = a | {"z": 3}
        a |= {"y": 4}
        return a == b, a != b, c, a, x + len(a)

    run_both(f, _x, expect_graphs=1)


def test_changing_size_while_iterating_raises_as_eager():
    def f(x):
        d = {"a": x, "b": x}
        y = x * 2
        for name in d:
            if name == "a":
                d["c"] = y
        return y

    opt = danlu_dynamo.optimize(Counter())(f)
    with pytest.raises(RuntimeError, match="changed size during iteration") as eager_err:
        f(torch.randn(3))
    with pytest.raises(RuntimeError, match="changed size during iteration") as got:
        opt(torch.randn(3))
    assert str(got.value) == str(eager_err.value)

    def g(x):
        d = {"a": x, "b": x}
        ks = d.keys()
        it = iter(ks)
        first = next(it)
        d.pop("b")
        return first, next(it, None)

    with pytest.raises(RuntimeError, match="changed size"):
        g(torch.randn(3))
    with pytest.raises(RuntimeError, match="changed size"):
        danlu_dynamo.optimize(Counter())(g)(torch.randn(3))


def test_loop_that_breaks_out_then_mutates_has_no_break():
    def f(x):
        d = {"a": x, "b": x + 1}
        for name in d:
            if name == "a":
                break
        d["c"] = x * 3  # the iterator is no longer in use
        return name, d

    run_both(f, _x, expect_graphs=1)


def test_views_of_tensor_values_membership_breaks_cleanly():
    def f(x, y):
        d = {"a": x}
        v = d.values()
        z = x + 1
        return (y in v), z  # tensor equality depends on data: eager decides

    def inputs(gen):
        t = rand(gen, 1)
        return t, t

    run_both(f, inputs, expect_breaks=None)


def test_view_type_checks():
    def f(x):
        d = {"a": x}
        k = d.keys()
        from collections.abc import ItemsView, KeysView, Set, ValuesView

        return (
            isinstance(k, KeysView),
            isinstance(k, Set),
            isinstance(d.values(), ValuesView),
            isinstance(d.items(), ItemsView),
            type(d.items()).__name__,
            bool(k),
            bool({}.keys()),
            x * 2,
        )

    run_both(f, _x, expect_graphs=1)


def test_side_effects_on_input_dict_match_eager_after_views():
    def f(x, d):
        k = d.keys()
        for name in list(k):
            d[name] = d[name] * 2
        d.setdefault("extra", x)
        return len(k)

    def inputs(gen):
        return rand(gen, 2), {"a": rand(gen, 2), "b": rand(gen, 2)}

    opt = danlu_dynamo.optimize(Counter())(f)
    args = inputs(torch.Generator().manual_seed(1))
    a_e, a_c = clone(args), clone(args)
    assert f(*a_e) == opt(*a_c)
    assert list(a_e[1]) == list(a_c[1])
    for name in a_e[1]:
        torch.testing.assert_close(a_e[1][name], a_c[1][name])


def test_graph_break_inside_a_loop_over_a_dict():
    def f(x, d):
        acc = x
        for name, t in d.items():
            if (t.sum() > 0).item():  # data-dependent: a break inside the loop
                acc = acc + t
            else:
                acc = acc - t
            d[name] = t * 2
        for name in d:
            acc = acc * len(name)
            if (acc.sum() > 0).item():
                print(end="")
        return acc

    def inputs(gen):
        return rand(gen, 3), {"a": rand(gen, 3), "bb": rand(gen, 3), "ccc": rand(gen, 3)}

    run_both(f, inputs, calls=4, expect_breaks=None)


def test_mutating_size_after_a_break_inside_the_loop_raises_as_eager():
    def f(x):
        d = {"a": x, "b": x}
        for name in d:
            if (x.sum() > -1e9).item():  # a break: the loop goes on in plain Python
                d[name + "!"] = x

    with pytest.raises(RuntimeError, match="changed size during iteration"):
        f(torch.randn(3))
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        danlu_dynamo.optimize(Counter())(f)(torch.randn(3))


def test_views_into_sets_and_frozensets():
    def f(x):
        d = {"b": 2, "a": 1}
        return set(d), set(d.keys()), frozenset(d.items()), frozenset(d.values()), x + 1

    run_both(f, _x, expect_graphs=1)
