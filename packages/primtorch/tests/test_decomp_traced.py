"""The canonical table under the package's tracer, on fake tensors: graphs hold canonical ops only
and run like eager. (Decompositions see sizes, never data, so they must trace on fakes.)"""

import operator

import pytest
import torch
import torch.nn.functional as F

from danlu_primtorch import decomposition_table, trace
from danlu_primtorch.canonical import CANONICAL_OPS


def _vision(x, w, grid):
    y = F.conv2d(x, w, padding=1)
    y = F.max_pool2d(F.hardswish(y), 3, 2, 1)
    y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
    y = F.avg_pool2d(y, 2, ceil_mode=True, count_include_pad=False, padding=1)
    y = F.grid_sample(y, grid, align_corners=False)
    return F.adaptive_avg_pool2d(F.pad(y, (1, 2, 0, 1), mode="reflect"), (2, 3))


def _text(ids, emb, w, target, weight):
    h = F.embedding(ids, emb)
    h = F.layer_norm(h, (h.shape[-1],))
    logits = F.silu(h) @ w
    return F.cross_entropy(logits.flatten(0, 1), target, weight=weight, label_smoothing=0.1)


def _vision_args():
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, 3, 9, 9, generator=g),
        torch.randn(4, 3, 3, 3, generator=g),
        torch.rand(2, 5, 4, 2, generator=g) * 2.2 - 1.1,
    )


def _text_args():
    g = torch.Generator().manual_seed(1)
    return (
        torch.randint(0, 11, (2, 6), generator=g),
        torch.randn(11, 8, generator=g),
        torch.randn(8, 7, generator=g),
        torch.randint(0, 7, (12,), generator=g),
        torch.rand(7, generator=g),
    )


@pytest.mark.parametrize(
    "fn, make_args", [(_vision, _vision_args), (_text, _text_args)], ids=["vision", "text"]
)
def test_traced_graph_is_canonical_and_matches_eager(fn, make_args):
    args = make_args()
    gm = trace(fn, *args, decompositions=decomposition_table("canonical"))
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    left = {str(t) for t in targets if t is not operator.getitem and t not in CANONICAL_OPS}
    # in-place ops that C++ composites emit (cross_entropy's masked_fill_) are for
    # functionalization to rewrite before decomposition; everything else must be canonical
    mutating = {str(t) for t in targets if t is not operator.getitem and t._schema.is_mutable}
    assert not left - mutating, f"non-canonical ops in the traced graph: {sorted(left - mutating)}"
    torch.testing.assert_close(gm(*args), fn(*args), rtol=1e-4, atol=1e-5)
