"""Advanced indexing (aten.index.Tensor) lowered to indirect loads, on hand-built graphs:
danlu-primtorch's fake tensors treat index.Tensor as data-dependent, so it cannot be traced."""

from __future__ import annotations

import operator

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


def _embedding_layer_norm():
    g = fx.Graph()
    w, idx = g.placeholder("w"), g.placeholder("idx")
    rows = g.call_function(aten.embedding.default, (w, idx))
    out = g.call_function(aten.native_layer_norm.default, (rows, [16], None, None, 1e-5))
    g.output((g.call_function(operator.getitem, (out, 0)),))
    return fx.GraphModule(torch.nn.Module(), g)


def test_row_index_is_checked_once_outside_the_row_loop():
    # an embedding row feeding a row reduction: the index (and its bounds check, which writes
    # the error flag) is fixed for the inner loop, so it sits before it and the loop vectorizes
    w = torch.randn(10, 16)
    idx = torch.tensor([[3, 0], [9, 7]])
    (c,) = compile_fx_batch([(_embedding_layer_norm(), [w, idx])])
    ref = torch.nn.functional.layer_norm(torch.nn.functional.embedding(idx, w), [16])
    torch.testing.assert_close(c(w, idx)[0], ref)
    src = c.kernel_source[c.kernel_source.index('extern "C"') :]
    assert src.index("*dl_err = 1") < src.index("#pragma omp simd")
    with pytest.raises(IndexError):
        c(w, torch.tensor([[3, 0], [10, 1]]))


def _gather_by_table(table):
    """x.index_select(1, table) with ``table`` a constant of the graph (a get_attr, as folded
    index tables are)."""
    root = torch.nn.Module()
    root.table = table
    g = fx.Graph()
    x = g.placeholder("x")
    t = g.get_attr("table")
    g.output((g.call_function(aten.index_select.default, (x, 1, t)),))
    return fx.GraphModule(root, g)


def test_constant_index_table_in_range_is_not_checked():
    # every value of a constant table is known when compiling: in range, the gather needs no
    # wrap, no check and no error flag; one bad value keeps the check (and eager's error)
    x = torch.randn(3, 5)
    good, bad = torch.tensor([4, 0, 2, 2]), torch.tensor([4, 0, 5, 2])
    (c,) = compile_fx_batch([(_gather_by_table(good), [x])])
    torch.testing.assert_close(c(x)[0], x.index_select(1, good))
    assert "dl_err" not in c.kernel_source[c.kernel_source.index('extern "C"') :]
    (c,) = compile_fx_batch([(_gather_by_table(bad), [x])])
    assert "*dl_err = 1" in c.kernel_source
    with pytest.raises(IndexError):
        c(x)
