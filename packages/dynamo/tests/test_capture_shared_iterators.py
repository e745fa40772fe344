"""zip/map/filter/enumerate/islice/chain over an iterator that other code also reads pull
from it one step at a time, as eager does (``zip(it, it)`` pairs neighbours; a loop that
stops early leaves the rest of the iterator to the code after it); helpers that would take a
shared iterator's items up front break the graph instead of taking them."""

import itertools

import torch
from _containers_common import Counter, rand, run_both

import danlu_dynamo


def _x(gen):
    return (rand(gen, 3),)


def test_zip_and_map_over_the_same_iterator():
    def f(x):
        xs = [x, x * 2, x * 3, x * 4]
        it = iter(xs)
        pairs = list(zip(it, it))
        chunks = list(zip(*[iter(range(6))] * 3))
        it2 = iter([1, 2, 3, 4])
        sums = list(map(lambda a, b: a + b, it2, it2))
        return [a + b for a, b in pairs], chunks, sums

    run_both(f, _x, expect_graphs=1)


def test_loop_that_stops_early_leaves_the_rest():
    def f(x):
        it = iter([x, x + 1, x + 2, x + 3, x + 4])
        for i, t in enumerate(it):  # noqa: B007 (t is read after the loop)
            if i == 1:
                break
        first = next(itertools.islice(it, 1, None))  # skips one, takes one
        odd = list(filter(lambda v: v is not None, it))
        return t, first, odd

    run_both(f, _x, expect_graphs=1)


def test_chain_and_filter_over_a_shared_iterator():
    def f(x):
        it = iter([1, 2, 3, 4, 5])
        head = next(itertools.chain(it, [9]))
        evens = itertools.filterfalse(lambda v: v % 2, it)
        first_even = next(evens)
        return head, first_even, list(it), x * head

    run_both(f, _x, expect_graphs=1)


def test_iterator_from_the_inputs_is_advanced_by_what_was_taken():
    def f(x, it):
        a, b = next(zip(it, it))
        return a + b + x

    opt = danlu_dynamo.optimize(Counter())(f)
    xs = [torch.randn(3) for _ in range(5)]
    it_e, it_c = iter(xs), iter(xs)
    torch.testing.assert_close(opt(torch.ones(3), it_c), f(torch.ones(3), it_e))
    assert [id(t) for t in it_c] == [id(t) for t in it_e]  # both left at the third item


def test_lazy_wrapper_live_at_a_graph_break():
    def f(x):
        it = iter([x, x * 2, x * 3, x * 4])
        z = zip(it, it)
        a, b = next(z)
        if (a.sum() > -1e9).item():  # a break: z and it continue in plain Python
            y = a + b
        c, d = next(z)
        return y + c + d, list(it)

    run_both(f, _x, expect_breaks=None)


def test_helpers_that_would_take_all_items_refuse_shared_iterators():
    def f(x):
        it = iter([1, 2, 3, 4])
        small = list(itertools.takewhile(lambda v: v < 2, it))  # eager leaves 3, 4
        return small, list(it), x + 1

    run_both(f, _x, expect_breaks=None)
