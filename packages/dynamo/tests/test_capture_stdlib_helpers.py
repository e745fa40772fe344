"""Standard-library helpers captured in one graph, with eager's results: sorted/min/max with
key= and reverse=, itertools, functools.reduce, operator.itemgetter/attrgetter,
collections.deque, defaultdict, Counter and OrderedDict."""

import collections
import functools
import itertools
import operator

import pytest
import torch
from _containers_common import Counter, clone, norm, rand, run_both
from _programs_common import same

import danlu_dynamo


def _x(gen):
    return (rand(gen, 3, 4),)


def _xs(gen):
    return ([rand(gen, n, 2) for n in (3, 1, 2)],)


# ------------------------------------------------------------------ sorted / min / max


def test_sorted_with_key_and_reverse():
    def f(x):
        words = ["pear", "fig", "apple", "kiwi"]
        pairs = [(2, "b"), (1, "z"), (2, "a"), (0, "q")]
        r = [
            sorted([3, 1, 2], reverse=True),
            sorted(words, key=len),
            sorted(words, key=len, reverse=True),  # stable among equal keys, as eager
            sorted(words, key=lambda w: w[-1]),
            sorted(pairs),
            sorted(pairs, key=lambda p: p[1], reverse=True),
            sorted(pairs, key=operator.itemgetter(0)),
            sorted(x.shape, reverse=True),
            sorted({"b": 1, "a": 2}),
            sorted({"b": 1, "a": 2}.items(), key=lambda kv: kv[1]),
        ]
        return r, x.permute(*sorted(range(x.dim()), reverse=True))

    run_both(f, _x, expect_graphs=1)


def test_sorted_tensors_by_size_and_list_sort():
    def f(xs):
        by_rows = sorted(xs, key=lambda t: t.shape[0])
        desc = sorted(xs, key=lambda t: t.size(0), reverse=True)
        ys = list(xs)
        ys.sort(key=lambda t: -t.numel())
        return torch.cat(by_rows), torch.cat(desc), [y.shape[0] for y in ys]

    run_both(f, _xs, expect_graphs=1)


def test_min_max_with_key():
    def f(xs):
        big = max(xs, key=lambda t: t.shape[0])
        small = min(xs, key=lambda t: t.numel())
        word = max(["aa", "b", "ccc"], key=len)
        first = min([(1, "x"), (1, "a")], key=operator.itemgetter(0))  # the first of ties
        return big * 2, small + 1, word, first, max([], default=7)

    run_both(f, _xs, expect_graphs=1)


def test_sorting_by_tensor_values_breaks_cleanly():
    def f(xs):
        return sorted(xs, key=lambda t: t.sum())  # depends on data: eager sorts

    run_both(f, lambda g: ([rand(g, 1) for _ in range(3)],), expect_breaks=None)


# ------------------------------------------------------------------ itertools


def test_itertools_constructors():
    def f(x):
        a, b = [x, x * 2], [x + 1]
        r = [
            list(itertools.chain(a, b, (x - 1,))),
            list(itertools.chain.from_iterable([a, b])),
            list(itertools.product([1, 2], "ab")),
            list(itertools.product([0, 1], repeat=2)),
            list(itertools.zip_longest([1, 2, 3], "ab", fillvalue="-")),
            list(itertools.zip_longest(a, [x])),
            list(itertools.accumulate([1, 2, 3, 4])),
            list(itertools.accumulate([1, 2, 3], operator.mul, initial=10)),
            list(itertools.accumulate(a)),
            list(itertools.islice(range(10), 2, 8, 2)),
            list(itertools.islice(a + b, 2)),
            list(itertools.repeat(x, 3)),
            list(itertools.combinations([1, 2, 3, 4], 2)),
            list(itertools.combinations_with_replacement("ab", 2)),
            list(itertools.permutations([1, 2, 3])),
            list(itertools.permutations(a, 1)),
            list(itertools.starmap(operator.add, [(1, 2), (3, 4)])),
            list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])),
            list(itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1])),
            list(itertools.compress("abcd", [1, 0, 1, 0])),
            list(itertools.filterfalse(None, [0, 1, 0, 2])),
        ]
        if hasattr(itertools, "pairwise"):
            r.append(list(itertools.pairwise([1, 2, 3])))
        return r, sum(itertools.chain(a, b))

    run_both(f, _x, expect_graphs=1)


def test_infinite_itertools_stopped_by_zip_islice_and_next():
    def f(x):
        c = itertools.count(5, 2)
        first = next(c), next(c)
        pairs = list(zip(itertools.count(), [x, x * 2, x * 3]))
        cyc = list(itertools.islice(itertools.cycle("ab"), 5))
        rep = list(zip(itertools.repeat(x), range(2)))
        acc = x
        for i, t in zip(itertools.count(1), [x, x]):
            acc = acc + i * t
        return first, next(c), pairs, cyc, rep, acc

    run_both(f, _x, expect_graphs=1)


def test_infinite_iterator_live_after_the_graph():
    def f(x):
        c = itertools.count(10)
        next(c)
        cy = itertools.cycle([1, 2, 3])
        next(cy)
        return c, cy, x + 1

    opt = danlu_dynamo.optimize(Counter())(f)
    c, cy, _ = opt(torch.randn(2))
    ce, cye, _ = f(torch.randn(2))
    assert type(c) is itertools.count and next(c) == next(ce)
    assert [next(cy) for _ in range(4)] == [next(cye) for _ in range(4)]


def test_groupby():
    def f(x):
        words = ["ant", "ape", "bee", "cat", "cow", "ant"]
        groups = [(k, list(g)) for k, g in itertools.groupby(words, key=lambda w: w[0])]
        runs = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 2, 2, 1])]
        stale = [list(g) for _, g in list(itertools.groupby("aabbc"))]  # eager: empty groups
        return groups, runs, stale, x * len(groups)

    run_both(f, _x, expect_graphs=1)


def test_functools_reduce():
    def f(xs):
        total = functools.reduce(operator.add, xs[0].shape + xs[1].shape)
        prod = functools.reduce(lambda a, b: a * b, [1, 2, 3], 10)
        t = functools.reduce(lambda a, b: a + b.sum(0), xs, torch.zeros(2))
        u = functools.reduce(torch.add, [xs[0][:1], xs[1], xs[2][:1]])
        return total, prod, t, u, functools.reduce(max, [3, 9, 2])

    run_both(f, _xs, expect_graphs=1)


def test_itemgetter_attrgetter():
    def f(x):
        ig = operator.itemgetter(1, 0)
        ag = operator.attrgetter("shape")
        return ig([x, x * 2]), ag(x), operator.itemgetter("k")({"k": x + 1})

    run_both(f, _x, expect_graphs=1)


# ------------------------------------------------------------------ collections


def test_deque_made_in_the_frame():
    def f(x):
        d = collections.deque([1, 2, 3], maxlen=4)
        d.append(4)
        d.append(5)  # full: drops 1
        d.appendleft(0)  # full: drops 5
        a, b = d.pop(), d.popleft()
        d.extend([7, 8])
        d.extendleft([-1])
        d.rotate(2)
        d.rotate(-1)
        out = [list(d), len(d), d[0], d[-1], 7 in d, d.maxlen, a, b, list(reversed(d))]
        w = collections.deque(maxlen=2)
        for t in (x, x * 2, x * 3):
            w.append(t)
        q = collections.deque()
        q.append(x)
        q.appendleft(x + 1)
        return out, d, sum(w), q.popleft(), len(q), collections.deque("ab")

    run_both(f, _x, expect_graphs=1)


def test_deque_passed_in_is_mutated_in_place():
    def f(x, d):
        d.append(x * 2)
        d.popleft()
        d.rotate(1)
        return sum(d) + len(d)

    def inputs(gen):
        return rand(gen, 2), collections.deque([rand(gen, 2), rand(gen, 2), rand(gen, 2)])

    run_both(f, inputs, expect_graphs=1)
    run_both(
        f, lambda g: (rand(g, 2), collections.deque([rand(g, 2)] * 3, maxlen=3)), expect_graphs=1
    )


def test_defaultdict():
    def f(x, words):
        groups = collections.defaultdict(list)
        for w in words:
            groups[w[0]].append(w)
        counts = collections.defaultdict(int)
        for w in words:
            counts[len(w)] += 1
        acc = collections.defaultdict(lambda: x)
        acc["a"] = acc["a"] + 1
        return groups, counts, acc["a"] * 2, "zz" in groups, acc.default_factory is None

    run_both(f, lambda g: (rand(g, 2), ["apple", "avocado", "bean", "corn"]), expect_graphs=1)


def test_defaultdict_passed_in():
    def f(x, d):
        d["new"].append(x)
        return len(d["old"]) + len(d)

    run_both(
        f,
        lambda g: (rand(g, 2), collections.defaultdict(list, {"old": [rand(g, 2)]})),
        expect_graphs=None,
    )


def test_counter():
    def f(x):
        c = collections.Counter("abracadabra")
        c.update(["a", "z"])
        c.subtract({"b": 1})
        d = collections.Counter(a=2, b=1)
        return (
            c.most_common(2),
            c["a"],
            c["missing"],
            sorted(c.elements())[:4],
            c.total() if hasattr(c, "total") else None,
            d,
            x * c["r"],
        )

    run_both(f, _x, expect_graphs=1)


def test_ordered_dict_and_fromkeys():
    def f(x):
        od = collections.OrderedDict()
        od["b"] = x
        od["a"] = x * 2
        od.move_to_end("b")
        keys = dict.fromkeys(["p", "q"], 0)
        none = dict.fromkeys("xy")
        ordered = collections.OrderedDict.fromkeys([3, 1])
        dd = collections.defaultdict.fromkeys(["k"], 1)
        return list(od), od, keys, none, ordered, dd, od[1] if 1 in od else None

    run_both(f, _x, expect_graphs=1)


def test_ordered_dict_with_int_keys_indexes_by_key():
    def f(x):
        od = collections.OrderedDict([(1, x), (0, x * 2)])
        return od[1] + 1, od[0] * 3  # keys, not positions

    run_both(f, _x, expect_graphs=1)


def test_sequence_equality_respects_types():
    def f(x):
        return (
            [1, 2] == (1, 2),
            (1, 2) == [1, 2],
            [x.shape[0]] == [3],
            collections.deque([1]) == [1],
            x + 1,
        )

    run_both(f, _x, expect_graphs=1)


@pytest.mark.parametrize("helper", ["chain", "product", "sorted_key", "deque", "reduce"])
def test_helpers_with_tensors_flowing(helper):
    def f(xs):
        if helper == "chain":
            return torch.stack(list(itertools.chain(xs[:1], xs[1:])))
        if helper == "product":
            return [a @ b.T for a, b in itertools.product(xs, repeat=2)]
        if helper == "sorted_key":
            return torch.cat(sorted(xs, key=lambda t: t.shape[0], reverse=True))
        if helper == "deque":
            d = collections.deque(xs, maxlen=2)
            d.rotate()
            return d.popleft() - d.pop()
        return functools.reduce(torch.maximum, xs)

    be = run_both(f, lambda g: ([rand(g, 2, 3) for _ in range(3)],), expect_graphs=1)
    assert isinstance(be, Counter)


def test_same_results_through_explain_have_no_breaks():
    """One program using many helpers at once: still one graph, no break."""

    def f(xs):
        d = collections.deque(maxlen=3)
        for i, t in zip(itertools.count(), xs):
            d.append(t * i)
        buckets = collections.defaultdict(list)
        for t in sorted(xs, key=lambda t: t.shape[0]):
            buckets[t.shape[0]].append(t)
        sums = (t.sum() for t in itertools.chain.from_iterable(buckets.values()))
        total = functools.reduce(operator.add, sums)
        return (
            sum(t.sum() for t in d),
            total,
            collections.Counter(t.shape[0] for t in xs).most_common(1),
        )

    args = ([torch.randn(n, 2) for n in (2, 3, 2)],)
    e = danlu_dynamo.explain(f)(*clone(args))
    assert e.graph_break_count == 0 and not e.eager_regions, e.break_reasons
    opt = danlu_dynamo.optimize(Counter())(f)
    assert same(norm(f(*clone(args))), norm(opt(*clone(args))))


_NT = collections.namedtuple("_NT", "a b", defaults=[0])


def test_namedtuple_helpers():
    def f(x):
        p = _NT._make([x, 2])
        q = type(p)._make(iter([x * 2, 3]))
        r = p._replace(b=5)
        return p, q, r, r._asdict(), _NT(x), _NT._fields, _NT._field_defaults, p == (x, 2)

    run_both(f, lambda g: (rand(g, 2),), expect_graphs=1, expect_breaks=None)
    e = danlu_dynamo.explain(f)(torch.randn(2))
    assert e.graph_break_count == 0, e.break_reasons


def test_containers_compare_the_same_tensor_as_equal_without_eq():
    def f(x, y):
        lst = [x]
        d = {"k": x}
        return (
            x in lst,
            lst.index(x),
            lst.count(x),
            [x, 1] == [x, 1],
            (x, 2) == (x, 2),
            x in d.values(),
            ("k", x) in d.items(),
            d == {"k": x},
            y * 2,
        )

    run_both(f, lambda g: (rand(g, 3), rand(g, 3)), expect_graphs=1)


def test_deque_mutated_while_iterating_raises_as_eager():
    def f(x):
        d = collections.deque([x, x + 1])
        for t in d:
            d.append(t)
        return d

    def g(x):
        d = collections.deque([x, x + 1])
        for t in d:
            if (t.sum() > -1e9).item():  # a break: the loop goes on in plain Python
                d.append(t)
        return d

    for fn in (f, g):
        with pytest.raises(RuntimeError, match="deque mutated during iteration"):
            fn(torch.randn(2))
        with pytest.raises(RuntimeError, match="deque mutated during iteration"):
            danlu_dynamo.optimize(Counter())(fn)(torch.randn(2))

    def ok(x):
        d = collections.deque([x, x + 1])
        out = [t * 2 for t in d]
        d.append(x)
        return out, d

    run_both(ok, lambda gen: (rand(gen, 2),), expect_graphs=1)
