"""Which shared values a graph stores and which its consumers recompute
(``StorageBox.maybe_realize_for_reuse``). On GPU graphs exp and log are cheap next to a
kernel's memory traffic, so a value made of them is recomputed by each consumer; on CPU
graphs it is stored once. Values: the Triton path's cases ``softmax_long_rows`` and the
wrapper cases check them against eager."""

from __future__ import annotations

import pytest
import torch
from helpers import aten_graph


def _stored(fn, *args, for_gpu):
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    graph = GraphLowering(aten_graph(fn, *args), list(args), for_gpu=for_gpu).run()
    return [
        [int(s) for s in b.layout.size]
        for b in graph.buffers
        if isinstance(b, ComputedBuffer) and not isinstance(b.data, Reduction)
    ]


@pytest.mark.parametrize("for_gpu", [True, False])
def test_softmax_exp_is_recomputed_on_gpu_stored_on_cpu(for_gpu):
    # exp(x - max) feeds the row sum and the division: stored, it is one more write and read
    # of the whole input on the GPU
    x = torch.randn(64, 3000)
    full = [
        s for s in _stored(lambda x: torch.softmax(x, -1), x, for_gpu=for_gpu) if s == [64, 3000]
    ]
    assert len(full) == (1 if for_gpu else 2), full  # the output; on the CPU the exp too


def test_costly_math_is_still_stored_on_gpu():
    # erf is a polynomial of a dozen steps: a shared erf is stored once, also on the GPU
    def fn(x):
        e = torch.special.erf(x * 3)
        return e.sum(-1), e * 2

    x = torch.randn(64, 3000)
    full = [s for s in _stored(fn, x, for_gpu=True) if s == [64, 3000]]
    assert len(full) == 2, full  # the shared erf and the product
