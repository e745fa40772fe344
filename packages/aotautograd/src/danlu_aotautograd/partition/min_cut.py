"""The min-cut rematerialization partitioner.

Instead of saving every forward value the backward reads, the backward may recompute cheap
ops (pointwise, views, casts, fills) from other saved values. Which values to save is a
minimum s-t cut: each forward value is an edge ``v_in -> v_out`` whose capacity is its size in
bytes; the source feeds the inputs and every op that must run in forward (it is too costly to
recompute — matmuls, reductions, convolutions — or random), and every value the backward
reads flows to the sink. A cut separates "computed in forward" from "needed in backward";
the values on cut edges are what we save, and their total size is the least possible.
"""

from __future__ import annotations

import operator

import networkx as nx
import torch
import torch.fx as fx

from danlu_aotautograd.partition.default import default_saved
from danlu_aotautograd.partition.graph_split import (
    JointParts,
    Partition,
    build_partition,
    is_size_node,
    node_bytes,
)
from danlu_aotautograd.tracing.tracer import is_random

aten = torch.ops.aten

# Cheap non-pointwise ops the backward may redo.
_RECOMPUTABLE = {
    aten.clone.default,
    aten._to_copy.default,
    aten.expand.default,
    aten.full.default,
    aten.full_like.default,
    aten.zeros.default,
    aten.zeros_like.default,
    aten.ones.default,
    aten.ones_like.default,
    aten.scalar_tensor.default,
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.empty_like.default,
    aten.where.self,
    aten.masked_fill.Scalar,
    aten.masked_fill.Tensor,
}


def recomputable(node: fx.Node) -> bool:
    """May the backward recompute this node instead of the forward saving it?"""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem or is_size_node(node):
        return True  # (size nodes: integer arithmetic on sizes)
    if not isinstance(target, torch._ops.OpOverload) or is_random(target):
        return False
    if target in _RECOMPUTABLE or target.is_view:
        return True
    return torch.Tag.pointwise in target.tags


def min_cut_partition(joint: fx.GraphModule, *, num_fw_outputs: int) -> Partition:
    """Save the fewest bytes for backward, recomputing cheap forward ops in backward."""
    parts = JointParts.of(joint, num_fw_outputs)
    dependent = parts.tangent_dependent
    needed_by_grads = _ancestors_in(parts, dependent)
    chained = chained_recomputes(joint, dependent)
    flow = nx.DiGraph()
    flow.add_node("source")
    flow.add_node("sink")
    inf_forward = set()
    for n in joint.graph.nodes:
        if n.op == "output" or n in dependent:
            continue
        size = node_bytes(n)
        tensor_valued = isinstance(n.meta.get("val"), torch.Tensor)
        if is_size_node(n):
            # a symbolic size: saving it costs an int, cheaper than any tensor
            flow.add_edge(n.name + "_in", n.name + "_out", capacity=1)
        elif tensor_valued:
            # bytes, scaled so that a tie goes to saving an input (alive anyway) over a view
            # or copy of it
            weight = size * 1000 + (0 if n.op == "placeholder" else 1)
            flow.add_edge(n.name + "_in", n.name + "_out", capacity=weight)
        else:  # tuples (multi-output ops) cannot be saved: only their items can
            flow.add_edge(n.name + "_in", n.name + "_out")
        if n.op in ("placeholder", "get_attr"):
            flow.add_edge("source", n.name + "_in")
        elif n in parts.fw_required and not recomputable(n):
            flow.add_edge("source", n.name + "_in")
            inf_forward.add(n)
        elif n in chained:
            flow.add_edge("source", n.name + "_in")
        elif is_random(n.target):
            flow.add_edge("source", n.name + "_in")
        elif not recomputable(n) and n.op == "call_function":
            # backward-only work the backward cannot take from a cheap recompute: it is
            # regular backward work, free to run on either side of the cut.
            pass
        for user in n.users:
            if user.op == "output":
                continue
            if user in dependent:
                if user in needed_by_grads:
                    flow.add_edge(n.name + "_out", "sink")
            else:
                flow.add_edge(n.name + "_out", user.name + "_in")
    for g in parts.grads:
        if isinstance(g, fx.Node) and g not in dependent:
            flow.add_edge(g.name + "_out", "sink")
    cut_value, (reachable, _) = nx.minimum_cut(flow, "source", "sink")
    by_name = {n.name: n for n in joint.graph.nodes}
    saved = []
    for name_in in reachable:
        if not name_in.endswith("_in"):
            continue
        name = name_in[: -len("_in")]
        if name + "_out" not in reachable:
            saved.append(by_name[name])
    # what the default partition (save every forward value the backward reads) would keep:
    # the memory this cut saves is measured against it
    primals = set(parts.primals)
    baseline = sum(node_bytes(n) for n in default_saved(joint, parts) if n not in primals)
    return build_partition(
        joint,
        parts,
        saved,
        "min_cut",
        cut_weight=cut_value,
        default_saved_bytes=baseline,
        chained_recomputes=len(chained),
    )


def chained_recomputes(joint: fx.GraphModule, dependent: set[fx.Node]) -> set[fx.Node]:
    """Forward values the backward reads that it must not recompute: the shared bases of
    other recomputed values the backward reads.

    A value the backward reads is materialized there whether it is saved or recomputed. If
    the recomputes of two or more such values would start from one recomputed value, that
    value is a link of a chain. LLaMA's residual stream is one: ``h[l+1] = h[l] + attn``,
    the norm's ``h[l] * rsqrt`` and ``h[l] ** 2`` are all read by the backward, and saving
    the bf16 attention and MLP outputs (half the bytes of an fp32 ``h``) let the cut
    recompute every ``h`` of every layer in the backward's first kernel, all of them alive
    from there on. Such bases are computed in the forward, where they are materialized
    anyway, and saved; the values recomputed from them take one step each.
    """
    read_by_backward = {
        n
        for n in joint.graph.nodes
        if n not in dependent and n.op != "output" and any(u in dependent for u in n.users)
    }
    # the recomputed values the backward reads that a node's recompute starts from, looking
    # through recomputed values it does not read (and views)
    bases: dict[fx.Node, frozenset] = {}
    readers: dict[fx.Node, int] = {}
    empty: frozenset = frozenset()
    for n in joint.graph.nodes:
        if n in dependent or n.op == "output":
            continue
        if not (recomputable(n) and n.op == "call_function"):
            bases[n] = empty  # computed in the forward
            continue
        start = empty.union(*(bases.get(i, empty) for i in n.all_input_nodes))
        if n in read_by_backward and not _alias(n):
            for b in start:
                readers[b] = readers.get(b, 0) + 1
            bases[n] = frozenset((n,))
        else:
            bases[n] = start
    return {
        n
        for n, count in readers.items()
        if count >= 2 and isinstance(n.meta.get("val"), torch.Tensor)
    }


def _alias(n: fx.Node) -> bool:
    """A view or a tuple item: recomputing it costs nothing and materializes nothing."""
    target = n.target
    return target is operator.getitem or (
        isinstance(target, torch._ops.OpOverload) and target.is_view
    )


def _ancestors_in(parts: JointParts, dependent: set[fx.Node]) -> set[fx.Node]:
    from danlu_aotautograd.partition.graph_split import ancestors

    return ancestors([g for g in parts.grads if g is not None]) & dependent
