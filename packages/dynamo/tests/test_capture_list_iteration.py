"""A list iterator reads the list at each step, as CPython's does: items appended while
iterating are visited (the work-queue idiom), also after a graph break inside the loop and
for a list iterator passed in; ``lst *= n`` changes the list in place (other names see it)."""

import torch
from _containers_common import Counter, rand, run_both

import danlu_dynamo


def _x(gen):
    return (rand(gen, 3),)


def test_work_queue_visits_items_appended_while_iterating():
    def f(x):
        queue = [x]
        out = []
        for t in queue:
            out.append(t.sum())
            if len(queue) < 5:
                queue.append(t * 2)
                queue.append(t + 1) if len(queue) < 5 else None
        return out, len(queue)

    run_both(f, _x, expect_graphs=1)


def test_iterator_made_before_appends():
    def f(x):
        lst = [x, x + 1]
        it = iter(lst)
        first = next(it)
        lst.append(x * 3)
        lst.insert(0, x - 1)  # shifts: the iterator's index stays where it was
        return first, list(it), next(it, None)

    run_both(f, _x, expect_graphs=1)


def test_exhausted_iterator_does_not_see_later_appends():
    def f(x):
        lst = [x]
        it = iter(lst)
        a = list(it)
        lst.append(x + 1)
        return a, list(it)

    run_both(f, _x, expect_graphs=1)


def test_work_queue_with_a_graph_break_inside_the_loop():
    def f(x):
        queue = [x]
        for t in queue:
            if (t.sum() > -1e9).item() and len(queue) < 4:  # a break inside the loop
                queue.append(t * 2)
        return len(queue), queue[-1]

    run_both(f, _x, expect_breaks=None)


def test_list_iterator_passed_in_sees_appends_made_in_the_frame():
    def f(it, lst, x):
        lst.append(x * 2)
        return [t + 1 for t in it]

    opt = danlu_dynamo.optimize(Counter())(f)
    for _ in range(2):
        xs = [torch.randn(3) for _ in range(2)]
        lst_e, lst_c = list(xs), list(xs)
        it_e, it_c = iter(lst_e), iter(lst_c)
        next(it_e), next(it_c)
        x = torch.randn(3)
        exp, got = f(it_e, lst_e, x), opt(it_c, lst_c, x)
        assert len(exp) == len(got) == 2
        for a, b in zip(exp, got):
            torch.testing.assert_close(a, b)
        assert next(it_c, None) is None


def test_in_place_repeat_is_seen_through_other_names():
    def f(x):
        a = [x, 1]
        b = a
        a *= 2
        c = [x]
        c += (x + 1,)
        return len(b), b[2] is a[0], c

    run_both(f, _x, expect_graphs=1)


def test_in_place_repeat_of_an_input_list():
    def f(x, lst):
        lst *= 2
        return x + len(lst)

    run_both(f, lambda g: (rand(g, 2), [rand(g, 2), 3]), expect_graphs=1)
