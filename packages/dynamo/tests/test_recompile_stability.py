"""Guards must be stable across calls with equal structure: namedtuple instances, partial
objects and functions made per call (closures, decorator wrappers) are guarded by what they
are and hold (types, code, field values that matter), not by the identity of each call's
object. And what matters is guarded: a partial with other arguments, a closure over other
values, a wrapper with another name run what they hold."""

import collections
import functools
import typing

import pytest
import torch
from _containers_common import Counter, clone, norm, rand
from _programs_common import fresh_seed, same

import danlu_dynamo

NT = collections.namedtuple("NT", "a n")
NTd = collections.namedtuple("NTd", "a b c", defaults=[3, "relu"])


class TNT(typing.NamedTuple):
    x: torch.Tensor
    k: int = 2

    def scaled(self):
        return self.x * self.k


def graphs_over_calls(fn, make_args, calls=6):
    """(graphs after the first call, graphs after all calls); results checked each call."""
    be = Counter()
    danlu_dynamo.reset()
    opt = danlu_dynamo.optimize(be)(fn)
    first = None
    for i in range(calls):
        seed = fresh_seed()
        args = make_args(torch.Generator().manual_seed(seed), i)
        a_e, a_c = clone(args), clone(args)
        exp, got = fn(*a_e), opt(*a_c)
        assert same(norm(exp), norm(got)), f"call {i}: expected={exp}\ngot={got}"
        if first is None:
            first = be.n
    return first, be.n


def test_namedtuple_arguments_compile_once():
    cases = [
        (lambda p: p.a * p.n, lambda g, i: (NT(rand(g, 3), 3),)),
        (lambda x, p: x * p.b + p.a, lambda g, i: (rand(g, 3), NTd(rand(g, 3)))),
        (lambda x, p: x.relu() if p.c == "relu" else x, lambda g, i: (rand(g, 3), NTd(1.5))),
        (lambda p: p.scaled() + p.x, lambda g, i: (TNT(rand(g, 2)),)),
        (lambda p: p.a.a * p.n, lambda g, i: (NT(NT(rand(g, 3), 1), 4),)),
        (lambda ps: sum(p.a * p.n for p in ps), lambda g, i: ([NT(rand(g, 2), 2)] * 2,)),
        (lambda p: p._replace(a=p.a + 1), lambda g, i: (NT(rand(g, 3), 3),)),
        (lambda p: p._asdict()["a"] * len(p._fields), lambda g, i: (NTd(rand(g, 3)),)),
    ]
    for fn, make in cases:
        first, total = graphs_over_calls(fn, make)
        assert first == total == 1, (first, total)


def test_namedtuple_field_value_change_recompiles_correctly():
    def f(x, p):
        return x.relu() if p.c == "relu" else x.sigmoid()

    be = Counter()
    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(4)
    for c in ("relu", "relu", "sig", "relu", "sig"):
        torch.testing.assert_close(opt(x, NTd(1, 2, c)), f(x, NTd(1, 2, c)))
    assert be.n == 2


def _g(a, b=1.0, scale=1.0):
    return a * scale + b


class _Holder(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_partial_with_keywords_compiles_once():
    def call(f, x):
        return f(x)

    def make_closure(k):
        def inner(a, b):
            return a * k + b

        return inner

    cases = [
        (call, lambda g, i: (functools.partial(_g, b=rand(g, 3), scale=2.0), rand(g, 3))),
        (call, lambda g, i: (functools.partial(_g, scale=3.0), rand(g, 3))),
        (call, lambda g, i: (functools.partial(make_closure(2.0), b=rand(g, 3)), rand(g, 3))),
        (call, lambda g, i: (functools.partial(lambda a, b: a - b, b=1.5), rand(g, 3))),
    ]
    for fn, make in cases:
        first, total = graphs_over_calls(fn, make)
        assert first == total == 1, (first, total)

    held = _Holder(functools.partial(_g, scale=4.0, b=0.5))
    first, total = graphs_over_calls(lambda x: held(x), lambda g, i: (rand(g, 3),))
    assert first == total == 1


def test_partial_with_other_arguments_runs_them():
    """These were wrong results: a partial's arguments and keyword names were not guarded."""

    def f(p, x):
        return p(x)

    def h(p, x):
        return p(scale=3.0)

    opt_f = danlu_dynamo.optimize(Counter())(f)
    opt_h = danlu_dynamo.optimize(Counter())(h)
    x = torch.randn(3)
    for p in (
        functools.partial(_g, b=2.0),
        functools.partial(_g, b=2.0, scale=5.0),
        functools.partial(_g, scale=5.0),
        functools.partial(_g, b=2.0),
    ):
        torch.testing.assert_close(opt_f(p, x), f(p, x))
    for p in (functools.partial(_g, x), functools.partial(_g, x, 7.0)):
        torch.testing.assert_close(opt_h(p, x), h(p, x))


def _make_scaler(k):
    def scale(t):
        return t * k

    return scale


def test_closures_made_per_call_compile_once_and_guard_their_cells():
    def call(f, x):
        return f(x) + 1

    first, total = graphs_over_calls(call, lambda g, i: (_make_scaler(2.0), rand(g, 3)))
    assert first == total == 1
    # a closure over a tensor: the cell's contents are a graph input
    first, total = graphs_over_calls(call, lambda g, i: (_make_scaler(rand(g, 3)), rand(g, 3)))
    assert first == total == 1
    # the captured constant differs: recompile, and run the new value
    be = Counter()
    opt = danlu_dynamo.optimize(be)(call)
    x = torch.randn(3)
    for k in (2.0, 2.0, 3.0, 2.0):
        torch.testing.assert_close(opt(_make_scaler(k), x), call(_make_scaler(k), x))
    assert be.n == 2


def test_identity_of_functions_made_per_call_is_guarded_when_used():
    def f(a, b, x):
        return x + 1 if a is b else x - 1

    opt = danlu_dynamo.optimize(Counter())(f)
    x = torch.randn(3)
    s1, s2 = _make_scaler(1.0), _make_scaler(1.0)
    for a, b in ((s1, s1), (s1, s2), (s2, s2), (s2, s1)):
        torch.testing.assert_close(opt(a, b, x), f(a, b, x))


def _deco(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k) + 1

    return inner


def _module_level(t):
    """doc of _module_level"""
    return t.cos()


def test_wraps_decorated_functions_made_in_the_frame_are_traced():
    def f(x):
        h = _deco(lambda t: t * 2)
        return h(x), h.__name__, h.__wrapped__(x)

    def g(x):
        @_deco
        def body(t):
            """body's doc"""
            return t.sin()

        return body(x), body.__name__, body.__qualname__, body.__doc__, body.__module__

    def k(x):
        h = _deco(_module_level)
        return h(x), h.__name__, h.__doc__

    for fn in (f, g, k):
        first, total = graphs_over_calls(fn, lambda g, i: (rand(g, 3),))
        assert first == total == 1
        e = danlu_dynamo.explain(fn)(torch.randn(3))
        assert e.graph_break_count == 0 and not e.eager_regions, e.break_reasons


def test_returned_wrapper_keeps_its_attributes():
    def f(x):
        @_deco
        def body(t):
            """the doc"""
            return t * 3

        body.tag = "mine"
        return body, x + 1

    opt = danlu_dynamo.optimize(Counter())(f)
    body, _ = opt(torch.randn(2))
    ref, _ = f(torch.randn(2))
    for name in ("__name__", "__qualname__", "__doc__", "__module__", "tag"):
        assert getattr(body, name) == getattr(ref, name), name
    assert body.__wrapped__.__name__ == "body"
    x = torch.randn(2)
    torch.testing.assert_close(body(x), ref(x))


def test_wrapper_passed_in_per_call_compiles_once_and_guards_its_name():
    def f(h, x):
        return h(x) * 2 if h.__name__ == "_module_level" else h(x)

    first, total = graphs_over_calls(f, lambda g, i: (_deco(_module_level), rand(g, 3)))
    assert first == total == 1
    opt = danlu_dynamo.optimize(Counter())(f)
    x = torch.randn(3)
    for h in (_deco(_module_level), _deco(_make_scaler(2.0)), _deco(_module_level)):
        torch.testing.assert_close(opt(h, x), f(h, x))


def test_closure_live_at_a_graph_break_does_not_recompile_the_resume_function():
    def f(x):
        h = _make_scaler(3.0)
        y = h(x)
        if (y.sum() > 0).item():  # a break: h reaches the resume function
            y = y + 1
        return h(y)

    first, total = graphs_over_calls(f, lambda g, i: (rand(g, 4),), calls=8)
    assert total <= first + 2, (first, total)  # at most one per branch side


def test_no_grad_decorated_function_made_per_call():
    def f(x):
        @torch.no_grad()
        def inner(t):
            return t * 2

        return inner(x) + x

    first, total = graphs_over_calls(f, lambda g, i: (rand(g, 3).requires_grad_(),))
    assert first == total


def _make_counter():
    count = 0

    def inc(t):
        nonlocal count
        count += 1
        return t * count

    return inc


@pytest.mark.parametrize("path", ["bytecode", "segments"])
def test_nonlocal_write_goes_to_the_cell_of_this_calls_closure(path, monkeypatch):
    """One cache entry serves every closure of the same code, so a write to a cell must go to
    the cell of the closure passed in this call, not the one seen while tracing."""
    from danlu_dynamo import config

    monkeypatch.setattr(config, "capture_path", path)

    def f(g, x):
        return g(x)

    be = Counter()
    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(3)
    for _ in range(3):
        g_c, g_e = _make_counter(), _make_counter()
        torch.testing.assert_close(opt(g_c, x), f(g_e, x))
        torch.testing.assert_close(g_c(x), g_e(x))  # the count each closure holds now
    assert be.n == 1
