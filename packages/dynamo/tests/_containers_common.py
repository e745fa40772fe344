"""Harness for the container/stdlib capture tests: eager vs captured on fresh random inputs,
results and mutated inputs compared, graphs and breaks counted."""

from __future__ import annotations

import collections
import enum
import itertools

import torch
from _programs_common import fresh_seed, same

import danlu_dynamo

_VIEWS = tuple(type(getattr({}, k)()) for k in ("keys", "values", "items")) + tuple(
    type(getattr(collections.OrderedDict(), k)()) for k in ("keys", "values", "items")
)


class Counter:
    """A backend that counts the graphs it is given."""

    def __init__(self):
        self.n = 0

    def __call__(self, gm, example_inputs):
        self.n += 1
        return gm.forward


def norm(x):
    """A value comparable with ``same``: views and sets as tagged lists, deques as lists."""
    if isinstance(x, _VIEWS):
        return ("view", type(x).__name__, [norm(v) for v in x])
    if isinstance(x, set | frozenset):
        return ("set", type(x).__name__, sorted((norm(v) for v in x), key=repr))
    if isinstance(x, collections.deque):
        return ("deque", x.maxlen, [norm(v) for v in x])
    if isinstance(x, dict):
        return (type(x).__name__, [(norm(k), norm(v)) for k, v in x.items()])
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return (type(x).__name__, [norm(v) for v in x])
    if isinstance(x, list | tuple):
        return type(x)([norm(v) for v in x])
    if isinstance(x, enum.Enum | type | torch.nn.Module):
        return ("obj", repr(x))
    return x


def clone(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, list):
        return [clone(v) for v in x]
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return type(x)(*[clone(v) for v in x])
    if isinstance(x, tuple):
        return tuple(clone(v) for v in x)
    if isinstance(x, dict):
        c = type(x)() if type(x) is not collections.defaultdict else type(x)(x.default_factory)
        c.update({k: clone(v) for k, v in x.items()})
        return c
    if isinstance(x, set):
        return set(x)
    if isinstance(x, collections.deque):
        return collections.deque([clone(v) for v in x], x.maxlen)
    return x


def run_both(fn, make_inputs, calls=3, backend=None, expect_graphs=None, expect_breaks=0):
    """``make_inputs(gen)`` -> argument tuple. Each call: fresh seed, eager and captured on
    equal copies; results and the arguments afterwards must match. Returns the backend."""
    be = backend if backend is not None else Counter()
    danlu_dynamo.reset()
    opt = danlu_dynamo.optimize(be)(fn)
    for _ in range(calls):
        seed = fresh_seed()
        args = make_inputs(torch.Generator().manual_seed(seed))
        a_e, a_c = clone(args), clone(args)
        torch.manual_seed(seed)
        exp = fn(*a_e)
        torch.manual_seed(seed)
        got = opt(*a_c)
        assert same(norm(exp), norm(got)), f"seed={seed}\nexpected={exp}\ngot={got}"
        assert same(norm(a_e), norm(a_c)), f"seed={seed}: inputs differ after the call"
    breaks = danlu_dynamo.explain(fn)(*clone(make_inputs(torch.Generator().manual_seed(0))))
    n_breaks = breaks.graph_break_count + len(breaks.eager_regions)
    if expect_breaks is not None:
        assert n_breaks == expect_breaks, [str(r.reason) for r in breaks.break_reasons] + list(
            breaks.eager_regions
        )
    if expect_graphs is not None and isinstance(be, Counter):
        assert be.n == expect_graphs, be.n
    return be


def rand(gen, *shape):
    return torch.randn(*shape, generator=gen)


def take(it, n):
    return list(itertools.islice(it, n))
