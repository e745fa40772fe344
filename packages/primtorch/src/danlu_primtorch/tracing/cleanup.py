"""Remove nodes whose results nobody uses, keeping anything with an effect."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .symbolic_values import PURE_SIZE_FUNCTIONS


def has_effect(node: fx.Node) -> bool:
    """Mutates an input, draws random numbers (removing it would shift the RNG stream), or
    is not an ATen op we understand."""
    if node.op != "call_function":
        return node.op in ("placeholder", "output")
    target = node.target
    if target is operator.getitem or target in PURE_SIZE_FUNCTIONS:
        return False
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags
    return True


def eliminate_dead_nodes(graph: fx.Graph) -> int:
    """Delete unused effect-free nodes (back to front); return how many were removed."""
    removed = 0
    for node in reversed(list(graph.nodes)):
        if not node.users and not has_effect(node):
            graph.erase_node(node)
            removed += 1
    return removed
