"""What the min-cut partitioner may recompute in the backward, and what it must not although
bytes alone would have it do so.

The cut minimizes the bytes kept for the backward; a recompute costs the backward a pass over
its inputs. ``recomputable`` says which ops are cheap enough to redo at all;
``chained_recomputes`` finds chains of values the backward reads (each materialized there
anyway), which are computed in the forward instead: ``min_cut.py`` ties them to the source.
``library_operands`` (opt-in, ``DANLU_KEEP_LIBRARY_OPERANDS=1``) finds the values a library
op (a matmul, a convolution, attention) reads on both sides, to be kept the same way.
"""

from __future__ import annotations

import operator
import os

import torch
import torch.fx as fx

from danlu_aotautograd.partition.graph_split import is_size_node
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


# Ops whose operands must be in memory: a recomputed operand of one is written by the
# backward, not folded into the op.
_LIBRARY = {
    aten.mm,
    aten.bmm,
    aten.addmm,
    aten.baddbmm,
    aten.convolution,
    aten.convolution_backward,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_cudnn_attention,
}


def keep_library_operands() -> bool:
    """The experiment's switch, read at each partition (the graph cache key includes it)."""
    return os.environ.get("DANLU_KEEP_LIBRARY_OPERANDS") == "1"


def library_operands(joint: fx.GraphModule, dependent: set[fx.Node]) -> set[fx.Node]:
    """Recomputable forward values a library op reads, directly or through views, in the
    forward and again in the backward.

    Such a value is in memory in the forward (its library op reads it there), so saving it
    costs the forward nothing but the bytes kept; recomputed, the backward reads its inputs
    and writes it again before its own library op. LLaMA's ``silu(gate) * up`` (the down
    projection's input, read again by its weight gradient) and the bf16 casts of the
    weights are such values; the bytes-only cut recomputes them. Opt-in until measured on a
    GPU: it trades activation memory for backward traffic."""
    out = set()
    for n in joint.graph.nodes:
        if n in dependent or n.op != "call_function" or not recomputable(n) or _alias(n):
            continue
        if not isinstance(n.meta.get("val"), torch.Tensor):
            continue
        sides = _library_reader_sides(n, dependent)
        if sides == {False, True}:
            out.add(n)
    return out


def _library_reader_sides(n: fx.Node, dependent: set[fx.Node]) -> set[bool]:
    """For each library op reading ``n`` (through views): is it in the backward?"""
    sides: set[bool] = set()
    stack, seen = [n], {n}
    while stack:
        for u in stack.pop().users:
            if u.op != "call_function" or u in seen:
                continue
            seen.add(u)
            if _alias(u):
                stack.append(u)
            elif getattr(u.target, "overloadpacket", None) in _LIBRARY:
                sides.add(u in dependent)
    return sides
