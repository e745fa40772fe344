"""Symbolic graphs for a GPU, lowered without one: the trace's values are fake CUDA tensors.
An ATen fallback's outputs are described by the trace (symbolic sizes, the graph's device);
the lowering used to refuse any output not on the CPU or ``meta`` there, and with it the whole
graph ran eagerly (a BERT encoder over a stream of lengths on CUDA: 0.62x of eager)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from danlu_inductor.graph import GraphLowering
from danlu_primtorch.fake.tensor import FakeTensor


def _trace_for_cuda(fn, args):
    """``fn`` traced with symbolic sizes on the CPU, every value then moved to a fake cuda:0."""
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    with torch.no_grad():
        gm = trace(fn, *args, decompositions=decomposition_table(), dynamic=True)
    cuda = torch.device("cuda", 0)
    for node in gm.graph.nodes:
        for v in torch.utils._pytree.tree_leaves(node.meta.get("val")):
            if isinstance(v, FakeTensor):
                v.fake_device = cuda
    return gm, [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]


def test_a_fallback_in_a_symbolic_gpu_graph_lowers():
    def fn(x):
        return F.max_pool2d(x[:, None], 2).sum((1, 2, 3)) * 2

    gm, inputs = _trace_for_cuda(fn, [torch.randn(3, 6, 20)])
    g = GraphLowering(gm, inputs, for_gpu=True)
    g.run()  # raised NotLowered("extern output on cuda:0 ...") before
    assert dict(g.fallbacks) == {"aten.max_pool2d_with_indices.default": 1}
    outs = [b for b in g.buffers if type(b).__name__ == "MultiOutput"]  # values, indices
    assert len(outs) == 2
    for b in outs:  # described by the trace: the sizes stay symbolic
        assert any(s.free_symbols for s in b.layout.size), b.layout


def test_an_alignment_padding_lowers_symbolically():
    """CUDA attention pads its mask's last dim by ``16 - n % 16``: at least 1, at most 16,
    which the lowering proves from the trace's ranges (sympy alone cannot)."""

    def fn(x, m):
        n = x.shape[-1]
        return (x + F.pad(m, (0, 16 - n % 16))[..., :n]).sum(-1)

    gm, inputs = _trace_for_cuda(fn, [torch.randn(3, 6, 20), torch.randn(3, 6, 20)])
    g = GraphLowering(gm, inputs, for_gpu=True)
    g.run()
    assert not g.fallbacks, dict(g.fallbacks)
