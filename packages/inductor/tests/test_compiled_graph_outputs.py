"""``CompiledGraph`` hands back the graph's outputs in the graph's structure: a flat tuple
straight from the wrapper's list, anything else through the pytree spec."""

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.pipeline.compiled import CompiledGraph


def _compiled(outputs):
    flat, spec = pytree.tree_flatten(outputs)
    return CompiledGraph(lambda args: list(flat), spec, "", "", None, None, {}), flat


def test_a_flat_tuple_comes_back_as_a_tuple_of_the_same_objects():
    a, b = torch.randn(2), torch.randn(3)
    compiled, _ = _compiled((a, None, b, 3))
    out = compiled()
    assert type(out) is tuple and len(out) == 4
    assert out[0] is a and out[1] is None and out[2] is b and out[3] == 3


def test_nested_and_non_tuple_outputs_keep_their_structure():
    a, b, c = torch.randn(1), torch.randn(2), torch.randn(3)
    for outputs in ((a, (b, c)), [a, b], {"x": a, "y": (b,)}, ((a,),), (), a):
        compiled, _ = _compiled(outputs)
        out = compiled()
        assert pytree.tree_structure(out) == pytree.tree_structure(outputs)
        assert all(x is y for x, y in zip(pytree.tree_leaves(out), pytree.tree_leaves(outputs)))
