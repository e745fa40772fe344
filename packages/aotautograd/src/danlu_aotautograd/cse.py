"""Common subexpression elimination on a traced, functional ATen graph.

Autocast casts an input once per consumer: LLaMA's normalised hidden state feeds the q, k and v
projections, and the trace holds three ``_to_copy(h, bf16)`` nodes where one value is needed.
Each became a buffer of its own: three stores of the same values in the forward, three copies
saved for the backward. Here two nodes that call the same pure ATen op on the same arguments
become one, before the joint graph is partitioned, so the forward computes the value once and
the backward reads one saved copy.

Pure means: an ``aten``/``prims`` overload that writes none of its arguments, is not random
(``nondeterministic_seeded``), and whose value is not a size (sizes are bookkept by the trace).
Tuple outputs' ``getitem`` nodes follow their parent. Two graph outputs never become one
tensor: eager returns two, which the caller may change apart.
"""

from __future__ import annotations

import operator

import torch
from torch import fx

_NAMESPACES = ("aten", "prims")


def _pure(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target.namespace not in _NAMESPACES or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    if target._schema.is_mutable:  # writes one of its arguments
        return False
    val = node.meta.get("val")
    return not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _key_of(value):
    """A hashable form of an argument: nodes as themselves (a merged node's users already
    read its representative), containers item by item, constants with their type (1, 1.0
    and True hash alike)."""
    if isinstance(value, fx.Node):
        return ("node", value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key_of(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key_of(v)) for k, v in value.items())))
    if isinstance(value, float) and value != value:
        return ("nan", id(value))  # nan equals nothing, itself included
    return (type(value), value)


def eliminate_common_subexpressions(gm: fx.GraphModule) -> int:
    """Merge the duplicate pure computations of ``gm`` in place; returns how many nodes went."""
    graph = gm.graph
    output = next((n for n in reversed(graph.nodes) if n.op == "output"), None)
    seen: dict = {}
    returned = set(output.all_input_nodes) if output is not None else set()
    removed = 0
    for node in list(graph.nodes):
        if not _pure(node):
            continue
        try:
            key = (node.target, _key_of(node.args), _key_of(node.kwargs))
            hash(key)
        except TypeError:  # an argument that cannot be compared (an opaque object)
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if node in returned and first in returned:
            continue  # two outputs stay two tensors
        if node in returned:
            returned.add(first)
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        removed += 1
    if removed:
        graph.lint()
        gm.recompile()
    return removed
