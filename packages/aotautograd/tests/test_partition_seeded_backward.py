"""Seeded ops that read a tangent are backward ops: cuDNN attention's backward takes the
forward's philox seed and offset and is tagged nondeterministic_seeded like a random op. The
partition must put it in the backward (not refuse the graph, nor pull it into the forward)."""

import pytest
import torch

import danlu_aotautograd as da

aten = torch.ops.aten


def _graphs(fn, *inputs):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    compiled = da.aot_function(fn, keep)
    try:  # the CUDA-only kernel cannot run on CPU; the partition happens before
        compiled(*inputs)
    except NotImplementedError:
        pass
    return graphs


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("causal", [True, False])
def test_cudnn_attention_backward_goes_to_the_backward_graph(causal):
    def fn(q, k, v):
        out = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
        return (out[0] * 2).sum()

    q, k, v = [torch.randn(2, 4, 16, 64, requires_grad=True) for _ in range(3)]
    graphs = _graphs(fn, q, k, v)
    assert len(graphs) == 2, graphs
    forward, backward = map(_targets, graphs)
    bwd_op = aten._scaled_dot_product_cudnn_attention_backward.default
    assert aten._scaled_dot_product_cudnn_attention.default in forward
    assert bwd_op not in forward and bwd_op in backward
    # the forward attention is not recomputed in the backward (its seed would differ)
    assert aten._scaled_dot_product_cudnn_attention.default not in backward


def test_a_forward_random_op_stays_in_the_forward():
    def fn(x):
        return (torch.nn.functional.dropout(x, 0.5, training=True) * x).sum()

    x = torch.randn(8, 8, requires_grad=True)
    torch.manual_seed(0)
    graphs = _graphs(fn, x)
    forward, backward = map(_targets, graphs)
    randoms = [
        t for t in forward + backward if torch.Tag.nondeterministic_seeded in getattr(t, "tags", ())
    ]
    assert (
        randoms and all(t in forward for t in randoms) and not any(t in backward for t in randoms)
    )
