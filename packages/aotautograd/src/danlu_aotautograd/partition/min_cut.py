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
from danlu_aotautograd.partition.recompute_bans import (
    chained_recomputes,
    keep_library_operands,
    library_operands,
    recomputable,
)
from danlu_aotautograd.tracing.tracer import is_random

aten = torch.ops.aten


def min_cut_partition(joint: fx.GraphModule, *, num_fw_outputs: int) -> Partition:
    """Save the fewest bytes for backward, recomputing cheap forward ops in backward."""
    parts = JointParts.of(joint, num_fw_outputs)
    dependent = parts.tangent_dependent
    needed_by_grads = _ancestors_in(parts, dependent)
    chained = chained_recomputes(joint, dependent)
    kept_operands = library_operands(joint, dependent) if keep_library_operands() else set()
    computed_in_forward = chained | kept_operands
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
        elif n in computed_in_forward:
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
        library_operands_kept=len(kept_operands),
    )


def _ancestors_in(parts: JointParts, dependent: set[fx.Node]) -> set[fx.Node]:
    from danlu_aotautograd.partition.graph_split import ancestors

    return ancestors([g for g in parts.grads if g is not None]) & dependent
