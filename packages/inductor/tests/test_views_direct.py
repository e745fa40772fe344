"""The lazy views of ir/nodes.py and lowering/views.py, on non-contiguous inputs: every index
of a view chain reaches the element torch's view reaches, and where torch's result is a view
(no copy) the chain's strided form (``as_strided_view``) has torch's strides and offset."""

from __future__ import annotations

import re

import pytest
import torch
from ir_eval import LoweringContext

from danlu_inductor.ir import nodes as ir
from danlu_inductor.lowering import LOWERINGS

aten = torch.ops.aten


def _inputs():
    g = torch.Generator().manual_seed(7)
    return {
        # sizes [7, 3], strides [1, 32], storage offset 1
        "t_slice": torch.randn(6, 16, generator=g).t()[1:8, ::2],
        # sizes [6, 4, 5], strides [1, 30, 6]
        "permuted": torch.randn(4, 5, 6, generator=g).permute(2, 0, 1),
        # contiguous, storage offset 3
        "offset": torch.randn(40, generator=g)[3:27],
        # a broadcast input: stride 0
        "expanded": torch.randn(5, 1, generator=g).expand(5, 4),
    }


CHAINS = {
    "permute-unsqueeze-expand-select-slice": (
        "t_slice",
        [
            (aten.permute.default, [1, 0]),
            (aten.unsqueeze.default, 1),
            (aten.expand.default, [3, 4, 7]),
            (aten.select.int, 1, 2),
            (aten.slice.Tensor, 1, 1, 6, 2),
        ],
    ),
    "transpose-reshape(copy)-slice": (
        "t_slice",
        [
            (aten.transpose.int, 0, 1),
            (aten.reshape.default, [21]),
            (aten.slice.Tensor, 0, 3, 15, 4),
        ],
    ),
    "reshape-squeeze-t": (
        "t_slice",
        [(aten.reshape.default, [7, 1, 3]), (aten.squeeze.dim, 1), (aten.t.default,)],
    ),
    "negative-select-unsqueeze-expand": (
        "t_slice",
        [(aten.select.int, 0, -1), (aten.unsqueeze.default, 0), (aten.expand.default, [5, 3])],
    ),
    "merge-dims-slice-permute": (
        "permuted",
        [
            (aten.reshape.default, [6, 20]),
            (aten.slice.Tensor, 1, 5, 15),
            (aten.permute.default, [1, 0]),
        ],
    ),
    "split-select-merge": (
        "permuted",
        [
            (aten.reshape.default, [3, 2, 4, 5]),
            (aten.select.int, 1, 0),
            (aten.reshape.default, [3, 20]),
        ],
    ),
    "step-slice-flatten(copy)": (
        "permuted",
        [(aten.slice.Tensor, 0, 0, None, 2), (aten.reshape.default, [60])],
    ),
    "as_strided-of-offset-input-t-slice": (
        "offset",
        [
            (aten.as_strided.default, [3, 4], [1, 3], 5),
            (aten.t.default,),
            (aten.slice.Tensor, 1, 0, 2),
        ],
    ),
    "reshape-unsqueeze-expand-permute": (
        "offset",
        [
            (aten.reshape.default, [4, 6]),
            (aten.unsqueeze.default, 0),
            (aten.expand.default, [2, 4, 6]),
            (aten.permute.default, [2, 0, 1]),
        ],
    ),
    "size-1-dims-in-and-out": (
        "t_slice",
        [
            (aten.reshape.default, [1, 7, 1, 3, 1]),
            (aten.reshape.default, [7, 3, 1]),
            (aten.permute.default, [2, 1, 0]),
            (aten.reshape.default, [3, 1, 7]),
        ],
    ),
    "broadcast-permute-flatten(copy)": (
        "expanded",
        [(aten.permute.default, [1, 0]), (aten.reshape.default, [20])],
    ),
}


def _shares_storage(result: torch.Tensor, x: torch.Tensor) -> bool:
    return result.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


@pytest.mark.parametrize("name", list(CHAINS))
def test_view_chain_reaches_torchs_elements(name):
    which, steps = CHAINS[name]
    x = _inputs()[which]
    ctx = LoweringContext(x)
    with ctx as (_, (node,)):
        expected = x
        for op, *args in steps:
            node = LOWERINGS[op](node, *args)
            expected = op(expected, *args)
            assert [int(s) for s in node.get_size()] == list(expected.shape), (op, args)
        strided = ir.as_strided_view(node)
    got = ctx.values(node)
    assert torch.equal(got, expected.contiguous()), name
    # realized as a strided view exactly when torch's result is a view of the input
    if _shares_storage(expected, x):
        assert strided is not None, name
        buf, layout = (
            (strided.buffer, strided.layout)
            if isinstance(strided, ir.ReinterpretView)
            else (strided, strided.layout)
        )
        assert buf.get_name() == ctx.graph.graph_input_names[0]
        keep = [d for d, s in enumerate(expected.shape) if s != 1]
        assert [int(layout.stride[d]) for d in keep] == [expected.stride(d) for d in keep]
        assert int(layout.offset) == expected.storage_offset() - x.storage_offset()
    else:
        assert strided is None, name


def test_value_chain_catches_a_wrong_reindex(monkeypatch):
    # the comparison above can fail: a permute that forgets to swap indices is caught
    x = _inputs()["t_slice"]
    ctx = LoweringContext(x)
    with ctx as (_, (node,)):
        view = LOWERINGS[aten.permute.default](node, [1, 0])
        view.reindex = lambda idx: [(idx[1] + 1) % 7, idx[0]]  # wrong element, right range
    assert not torch.equal(ctx.values(view), x.t().contiguous())


def test_views_never_copy():
    x = _inputs()["permuted"]
    ctx = LoweringContext(x)
    with ctx as (graph, (node,)):
        v = LOWERINGS[aten.permute.default](node, [2, 0, 1])
        v = LOWERINGS[aten.slice.Tensor](v, 1, 1, 5)
        v = LOWERINGS[aten.select.int](v, 0, 2)
        assert isinstance(v, ir.View) and v.storage_box() is node
    assert graph.buffers == []  # nothing realized, nothing computed


def test_reinterpret_view_bounds_match_torch_strides_for_expand():
    x = _inputs()["expanded"]
    ctx = LoweringContext(x)
    with ctx as (_, (node,)):
        v = LOWERINGS[aten.expand.default](LOWERINGS[aten.unsqueeze.default](node, 0), [3, 5, 4])
        strided = ir.as_strided_view(v)
    assert isinstance(strided, ir.ReinterpretView)
    assert [int(s) for s in strided.layout.stride] == [0, 1, 0]


def test_library_matmul_reads_a_flattened_or_transposed_view_without_a_copy():
    # the weight gradients of a channels-last MLP: mm(view(t, [-1, C]).t(), ...) where t is
    # computed here and also summed; the flattening of the 4-d buffer folds back to one
    # stride ((a // 6) // 6 is a // 36), so both matmuls read t's buffer as it is
    from helpers import check_same

    def f(g, a, w, w2):
        t = g * a
        m = torch.mm(t.view(-1, 64), w)
        s = t.sum(dim=(0, 1, 2))
        m2 = torch.mm(t.view(-1, 64).t(), w2)
        return m, s, m2

    gen = torch.Generator().manual_seed(3)
    args = [
        torch.randn(*s, generator=gen) for s in ((2, 6, 6, 64), (2, 6, 6, 64), (64, 32), (72, 16))
    ]
    compiled = check_same(f, *args, rtol=1e-4, atol=1e-4)
    # one kernel for t, one for the sum; no copy kernels in front of the matmuls
    assert compiled.num_kernels == 2, compiled.fusion_decisions()
    # the two reshaped matmul operands are views made by the wrapper's `view` (runtime.py)
    assert len(re.findall(r"[(, ]view\(", compiled.wrapper_source)) == 2, compiled.wrapper_source
    assert "torch.as_strided(" not in compiled.wrapper_source


def test_nested_floor_divisions_fold():
    import sympy

    from danlu_inductor.ir.symbols import FloorDiv, IMod, simplify_index

    i, c = sympy.symbols("v0 v1", integer=True, nonnegative=True)
    assert FloorDiv(FloorDiv(i, 6), 6) == FloorDiv(i, 36)
    flat = 2304 * FloorDiv(FloorDiv(i, 6), 6) + 384 * IMod(FloorDiv(i, 6), 6) + 64 * IMod(i, 6)
    assert sympy.expand(simplify_index(flat + c) - (64 * i + c)) == 0
    # a split that does not fold back (strides out of step) stays as it is
    odd = 2300 * FloorDiv(i, 36) + 384 * IMod(FloorDiv(i, 6), 6) + 64 * IMod(i, 6)
    assert simplify_index(odd).has(FloorDiv)


def test_a_chunk_of_a_flattened_image_folds():
    """A split reduction's chunk (flat = 784 * chunk + r) of a channels-last [N, 56, 56, C]
    image: w = r % 56, h = (14 * chunk + r // 56) % 56 (the inner quotient simplified), n =
    flat // 3136. It folds back to C * flat: no division left for each value."""
    import random

    import sympy

    from danlu_inductor.ir.symbols import FloorDiv, IMod, simplify_index

    x0, r0, c = sympy.symbols("x0 r0 x1", integer=True, nonnegative=True)
    flat = 784 * x0 + r0
    index = c + 256 * IMod(flat, 56) + 14336 * IMod(FloorDiv(flat, 56), 56)
    index += 802816 * FloorDiv(flat, 3136)
    assert index.has(FloorDiv)  # as the lowering builds it
    folded = simplify_index(index)
    assert sympy.expand(folded - (c + 256 * r0 + 200704 * x0)) == 0
    rng = random.Random(0)
    for _ in range(200):  # the same values as the unfolded index
        point = {x0: rng.randrange(256), r0: rng.randrange(784), c: rng.randrange(256)}
        assert int(index.xreplace(point)) == int(folded.xreplace(point))
    # an inner quotient by another divisor (r // 28) does not merge
    other = 14336 * IMod(14 * x0 + FloorDiv(r0, 28), 56) + 802816 * FloorDiv(flat, 3136)
    assert simplify_index(other).has(FloorDiv)


def test_symbolic_length_split_folds():
    """[b, s0, 128] read as [b*s0, 128]: the coefficient of the quotient holds the symbol."""
    import sympy

    from danlu_inductor.ir.symbols import FloorDiv, IMod, simplify_index

    i, c = sympy.symbols("v0 v1", integer=True, nonnegative=True)
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    flat = 128 * s0 * FloorDiv(i, s0) + 128 * IMod(i, s0) + c
    assert sympy.expand(simplify_index(flat) - (128 * i + c)) == 0
    nested = 512 * s0 * FloorDiv(i, 4 * s0) + 512 * IMod(FloorDiv(i, 4), s0) + 128 * IMod(i, 4)
    assert sympy.expand(simplify_index(nested) - 128 * i) == 0
    # strides out of step with the symbol: no fold
    assert simplify_index(128 * s0 * FloorDiv(i, s0) + 64 * IMod(i, s0)).has(FloorDiv)
