"""The default partitioner: the forward computes what its outputs need; save what backward reads."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from danlu_aotautograd.partition.graph_split import (
    JointParts,
    Partition,
    ancestors,
    build_partition,
    is_size_node,
)


def default_partition(joint: fx.GraphModule, *, num_fw_outputs: int) -> Partition:
    """Forward = everything the forward outputs (and random ops) need. Every forward value
    the backward reads is saved; backward-only work that needs no tangent runs in backward."""
    parts = JointParts.of(joint, num_fw_outputs)
    return build_partition(joint, parts, default_saved(joint, parts), "default")


def default_saved(joint: fx.GraphModule, parts: JointParts) -> list[fx.Node]:
    """The values the default partition saves for backward (the min-cut partitioner reports
    their size as what it saves memory against)."""
    forward_side = parts.fw_required | set(parts.primals)
    # sizes are computed in forward and saved as SymInts (never the tensors they are read from)
    forward_side |= {
        n
        for n in joint.graph.nodes
        if is_size_node(n) and n not in parts.tangent_dependent and n.op != "output"
    }
    # items of a multi-output forward op belong to the forward too: tuples cannot be saved
    forward_side |= {
        u
        for n in list(forward_side)
        if not isinstance(n.meta.get("val"), torch.Tensor)
        for u in n.users
        if u.target is operator.getitem
    }
    backward_side = ancestors([g for g in parts.grads if g is not None]) - forward_side
    return [n for n in forward_side if any(u in backward_side for u in n.users) or n in parts.grads]
