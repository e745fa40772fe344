"""Containers and standard-library helpers in captured programs, through the tracing backends
(aot_eager, inductor): one graph, no break, eager's values and gradients, no recompiles."""

import collections
import functools
import itertools
import operator

import pytest
import torch

import danlu

NT = collections.namedtuple("NT", "w scale")


def _views(x, d):
    k, v = d.keys(), d.values()
    d["extra"] = x.tanh()
    out = x * len(k)
    for name in sorted(k, key=len, reverse=True):
        out = out + d[name]
    return out + sum(v), "extra" in k


def _stdlib(x, p):
    win = collections.deque(maxlen=2)
    for i, s in zip(itertools.count(1), itertools.accumulate([1.0, 2.0, 3.0])):
        win.append(x * (i + s))
    pairs = [a * b for a, b in itertools.combinations(win, 2)]
    fused = functools.reduce(operator.add, pairs, p.w * p.scale)
    return fused.sin().sum(0)


def _closure(f, x):
    return f(x) + 1


def _scaler(k):
    def scale(t):
        return (t * k).relu()

    return scale


CASES = {
    "views": (_views, lambda: (torch.randn(4, 3), {"a": torch.randn(4, 3), "bb": torch.randn(3)})),
    "stdlib": (_stdlib, lambda: (torch.randn(3, 5), NT(torch.randn(5), 2.0))),
    "closure": (_closure, lambda: (_scaler(3.0), torch.randn(6))),
    "partial": (_closure, lambda: (functools.partial(torch.mul, other=2.5), torch.randn(6))),
}


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _tensors(v)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _tensors(v)]
    return []


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_containers_through_backend(case, backend):
    fn, make = CASES[case]
    danlu.reset()
    opt = danlu.compile(fn, backend=backend)
    for call in range(3):
        torch.manual_seed(call)
        args_e = make()
        torch.manual_seed(call)
        args_c = make()
        for t in _tensors(args_e) + _tensors(args_c):
            t.requires_grad_(t.is_floating_point() and call == 2)
        exp, got = fn(*args_e), opt(*args_c)
        te, tg = _tensors(exp), _tensors(got)
        assert len(te) == len(tg)
        for a, b in zip(te, tg):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
        assert (
            [v for v in exp if not isinstance(v, torch.Tensor)]
            == [v for v in got if not isinstance(v, torch.Tensor)]
            if isinstance(exp, tuple)
            else True
        )
        if call == 2:  # gradients too
            te[0].sum().backward()
            tg[0].sum().backward()
            for a, b in zip(_tensors(args_e), _tensors(args_c)):
                if a.grad is not None or b.grad is not None:
                    torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5)
    stats = danlu.CompileStats.current()
    assert stats.graph_breaks == 0
    # one graph for plain calls, one more for the call with requires_grad inputs
    assert len(stats.graphs) <= 2, len(stats.graphs)
