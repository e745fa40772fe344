"""slice_scatter / slice_backward: the unit-step case is a pad and a select (elementwise, so a
compiler fuses it); other steps scatter. Both match ATen on random bounds, dims and strides."""

import random

import pytest
import torch

import danlu_primtorch

aten = torch.ops.aten


@pytest.fixture(scope="module")
def table():
    return danlu_primtorch.decomposition_table("canonical")


def _cases(seed, count=150):
    rng = random.Random(seed)
    for _ in range(count):
        nd = rng.randint(1, 4)
        shape = [rng.randint(1, 7) for _ in range(nd)]
        dim = rng.randrange(nd)
        n = shape[dim]
        start = rng.choice([None, rng.randint(-n - 2, n + 2)])
        end = rng.choice([None, rng.randint(-n - 2, n + 2)])
        yield shape, dim, start, end, rng.choice([1, 1, 2, 3])


def test_slice_scatter_matches_aten(table):
    seed = random.randrange(1 << 30)
    for shape, dim, start, end, step in _cases(seed):
        base = torch.randn(list(reversed(shape)), dtype=torch.float64).permute(
            *reversed(range(len(shape)))
        )  # column-major: not contiguous
        src = torch.randn(aten.slice.Tensor(base, dim, start, end, step).shape)
        src = src.to(torch.float64)
        want = aten.slice_scatter.default(base, src, dim, start, end, step)
        got = table[aten.slice_scatter.default](base, src, dim, start, end, step)
        assert torch.equal(want, got), (seed, shape, dim, start, end, step)


def test_slice_backward_matches_aten(table):
    seed = random.randrange(1 << 30)
    for shape, dim, start, end, step in _cases(seed):
        start = 0 if start is None else start
        end = 2**62 if end is None else end  # what autograd passes for an open end
        probe = torch.empty(shape)
        grad = torch.randn(aten.slice.Tensor(probe, dim, start, end, step).shape)
        want = aten.slice_backward.default(grad, shape, dim, start, end, step)
        got = table[aten.slice_backward.default](grad, shape, dim, start, end, step)
        assert torch.equal(want, got), (seed, shape, dim, start, end, step)


def test_unit_step_is_elementwise(table):
    # no scatter left for a compiler: the result comes from a pad (and a select)
    from danlu_primtorch import trace

    def f(base, src):
        return aten.slice_scatter.default(base, src, 1, 2, 5), aten.slice_backward.default(
            src, [4, 9], 1, 2, 5, 1
        )

    gm = trace(f, torch.randn(4, 9), torch.randn(4, 3), decompositions=table)
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert aten.constant_pad_nd.default in targets
    assert aten.index_put.default not in targets
