"""The pass that pads misaligned 16-bit matmuls: same products, aligned library calls."""

from types import SimpleNamespace

import pytest
import torch
from helpers import aten_graph

from danlu_inductor.graph import _row_padded
from danlu_inductor.ir.layout import FixedLayout
from danlu_inductor.passes.pad_matmul import ALIGN, pad_matmuls, padded_row_strides

aten = torch.ops.aten
BF16 = torch.bfloat16


def _mm(a, b):
    return a @ b


def _addmm(bias, a, b):
    return torch.addmm(bias, a, b)


def _weight_grad(g, x):
    return g.t() @ x  # column-major left operand, rows of m = g.shape[1]


def _head(x, w):
    return x @ w.t()  # a language-model head: weight rows of n (the vocabulary)


CASES = {
    "n_col_major": (_head, lambda: [torch.randn(640, 512), torch.randn(1001, 512)]),
    "k": (_mm, lambda: [torch.randn(640, 1001), torch.randn(1001, 264)]),
    "n": (_mm, lambda: [torch.randn(640, 512), torch.randn(512, 1001)]),
    "m_col_major": (_weight_grad, lambda: [torch.randn(512, 1001), torch.randn(512, 264)]),
    "m_and_n_col_major": (
        _weight_grad,
        lambda: [torch.randn(512, 1001), torch.randn(512, 263)],
    ),
    "addmm_n": (
        _addmm,
        lambda: [torch.randn(1001), torch.randn(640, 512), torch.randn(512, 1001)],
    ),
    "bmm_k": (
        lambda a, b: torch.bmm(a, b),
        lambda: [torch.randn(4, 256, 1001), torch.randn(4, 1001, 136)],
    ),
}


def _aligned(t: torch.Tensor) -> bool:
    """Every row of the operand (its leading dimension) is a multiple of 16 bytes."""
    lead = [s for s, n in zip(t.stride()[-2:], t.shape[-2:]) if s != 1 and n > 1]
    return all(s % ALIGN == 0 for s in lead)


@pytest.mark.parametrize("name", sorted(CASES))
def test_padded_matmul_is_aligned_and_gives_the_same_product(name):
    fn, make = CASES[name]
    torch.manual_seed(hash(name) % 1000)
    inputs = [t.to(BF16) for t in make()]
    gm = aten_graph(fn, *inputs)
    expected = gm(*inputs)
    assert pad_matmuls(gm) == 1
    calls = [
        n
        for n in gm.graph.nodes
        if n.target in (aten.mm.default, aten.addmm.default, aten.bmm.default)
    ]
    assert len(calls) == 1
    operands = calls[0].args[-2:]
    for op in operands:
        assert _aligned(op.meta["val"]), (op.meta["val"].shape, op.meta["val"].stride())
    assert calls[0].meta["val"].shape[-1] % ALIGN == 0
    got = gm(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    expected = expected[0] if isinstance(expected, (tuple, list)) else expected
    # (a sliced product has padded rows here, as the compiled graph returns it)
    assert got.shape == expected.shape
    torch.testing.assert_close(got.float(), expected.float(), rtol=0, atol=0)


def test_aligned_or_small_matmuls_are_left_alone():
    for a, b in (
        (torch.randn(640, 512), torch.randn(512, 264)),  # aligned
        (torch.randn(30, 17), torch.randn(17, 9)),  # too small to pay for the copies
    ):
        gm = aten_graph(_mm, a.to(BF16), b.to(BF16))
        assert pad_matmuls(gm) == 0


def _pads(gm):
    return [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]


def test_one_padded_copy_feeds_both_gradients_of_a_head():
    """The output gradient g of `x @ w.t()` (vocabulary 1001) feeds g @ w (k misaligned) and
    g.t() @ x (m misaligned, column-major): both read one padded copy of g, padded as stored."""

    def grads(g, x, w):
        return g @ w, g.t() @ x

    g, x, w = (
        t.to(BF16) for t in (torch.randn(640, 1001), torch.randn(640, 512), torch.randn(1001, 512))
    )
    gm = aten_graph(grads, g, x, w)
    expected = gm(g, x, w)
    assert pad_matmuls(gm) == 2
    padded_g = [
        n
        for n in _pads(gm)
        if n.args[0].op == "placeholder" and n.args[0].meta["val"].shape == g.shape
    ]
    assert len(padded_g) == 1, [n.format_node() for n in _pads(gm)]
    assert padded_g[0].args[1] == [0, 7]  # columns only, in g's own layout
    got = gm(g, x, w)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=0)


def test_a_transposed_weight_is_padded_as_stored():
    x, w = torch.randn(640, 512).to(BF16), torch.randn(1001, 512).to(BF16)
    gm = aten_graph(_head, x, w)
    assert pad_matmuls(gm) == 1
    (pad,) = _pads(gm)
    assert pad.args[0].op == "placeholder" and pad.args[1] == [0, 0, 0, 7]  # rows of w
    assert pad.meta["val"].is_contiguous()  # the copy walks memory; the mm reads it transposed


def _padded_rows(size, stride) -> bool:
    """Whether a graph output laid out so is returned as a padded matmul's slice."""
    return _row_padded(SimpleNamespace(layout=FixedLayout(BF16, size, stride)))


def test_padded_row_strides():
    assert padded_row_strides([4, 3, 1001]) == [3 * 1008, 1008, 1]
    assert padded_row_strides([1001]) == [1]
    assert _padded_rows([640, 1001], [1008, 1])
    assert _padded_rows([2, 1, 1001], [1008, 5, 1])  # a size-1 dim's stride is free
    assert not _padded_rows([640, 1001], [1001, 1])
    assert not _padded_rows([640, 1000], [1000, 1])  # aligned already: plain row-major
    assert not _padded_rows([1001, 640], [1, 1008])


@pytest.mark.parametrize("bias", [False, True])
def test_columns_split_instead_of_a_padded_weight(bias):
    """A head ``x @ w.t()`` misaligned in N only: two library calls write one buffer with
    padded rows (the aligned first 1000 columns, then the last one); nothing is padded."""
    torch.manual_seed(7)
    x, w, b = (
        t.to(BF16) for t in (torch.randn(640, 512), torch.randn(1001, 512), torch.randn(1001))
    )
    fn, inputs = (_addmm_head, (b, x, w)) if bias else (_head, (x, w))
    gm = aten_graph(fn, *inputs)
    expected = gm(*inputs)
    assert pad_matmuls(gm, split_columns=True) == 1
    assert not _pads(gm)
    outs = [n for n in gm.graph.nodes if n.target in (aten.mm.out, aten.addmm.out)]
    assert [n.kwargs["out"].meta["val"].shape[-1] for n in outs] == [1000, 1]
    for n in outs:
        assert n.kwargs["out"].meta["val"].stride() == (1008, 1)  # rows of 16 bytes
    got = gm(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    expected = expected[0] if isinstance(expected, (tuple, list)) else expected
    assert got.stride() == (1008, 1)
    torch.testing.assert_close(got.float(), expected.float(), rtol=0, atol=0)


def _addmm_head(b, x, w):
    return torch.addmm(b, x, w.t())


def test_columns_are_split_only_for_a_transposed_right_operand():
    """``a @ b`` with a row-major ``b`` misaligned in N: its rows (N) need the padded copy."""
    a, b = torch.randn(640, 512).to(BF16), torch.randn(512, 1001).to(BF16)
    gm = aten_graph(_mm, a, b)
    assert pad_matmuls(gm, split_columns=True) == 1
    assert _pads(gm) and not [n for n in gm.graph.nodes if n.target is aten.mm.out]
