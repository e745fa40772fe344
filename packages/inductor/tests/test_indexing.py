"""Advanced indexing (aten.index.Tensor) lowered to indirect loads, on hand-built graphs:
danlu-primtorch's fake tensors treat index.Tensor as data-dependent, so it cannot be traced."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from danlu_inductor import compile_fx_batch

aten = torch.ops.aten
PATTERNS = [["i"], [None, "j"], ["i", "j"], [None, "j", "i"], ["i", None, "j"]]


def _graph(pattern):
    g = fx.Graph()
    x, i, j = g.placeholder("x"), g.placeholder("i"), g.placeholder("j")
    env = {"i": i, "j": j, None: None}
    g.output((g.call_function(aten.index.Tensor, (x, [env[k] for k in pattern])),))
    return fx.GraphModule(torch.nn.Module(), g)


@pytest.fixture(scope="module")
def compiled():
    x = torch.randn(4, 5, 6)
    i = torch.tensor([[0, 3], [2, -1]])
    j = torch.tensor([1, 4])
    return (x, i, j), compile_fx_batch([(_graph(p), [x, i, j]) for p in PATTERNS])


@pytest.mark.parametrize("k", range(len(PATTERNS)))
def test_index_matches_eager(compiled, k):
    (x, i, j), graphs = compiled
    env = {"i": i, "j": j, None: None}
    ref = aten.index.Tensor(x, [env[p] for p in PATTERNS[k]])
    got = graphs[k](x, i, j)[0]
    torch.testing.assert_close(got, ref)
    assert graphs[k].report["fallback_calls"] == 0


def test_out_of_range_index_raises(compiled):
    (x, _, j), graphs = compiled
    with pytest.raises(IndexError):
        graphs[0](x, torch.tensor([[7, 0], [0, 0]]), j)
