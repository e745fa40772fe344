"""Long softmax rows saved as their input and one row statistic, not as their output.

A language model's loss takes ``log_softmax`` of the logits (bf16 matmul output, cast to
float32 by autocast) over the vocabulary. ``aten._log_softmax`` is one op the partitioner
cannot recompute, and its backward reads the output, so the forward wrote and kept a float32
``[tokens, vocabulary]`` tensor (1 GB for LLaMA's 8 x 1024 tokens and 32000 words) although
the loss reads one element per row.

Here, in a joint graph whose backward reads that output, ``_log_softmax(x)`` becomes
``x - n`` and ``_softmax(x)`` becomes ``exp(x - n)``, with ``n`` the row's ``logsumexp``
(a reduction, kept: 4 bytes a row). The output is then pointwise in ``x`` and ``n``: the
min-cut partitioner saves the bf16 logits (alive anyway for the head's backward matmul) and
``n``, the forward never writes the output (the loss gathers ``x[target] - n``), and the
backward recomputes ``exp(x - n)`` inside its own kernel.

Eager's results at infinities are kept: ``n`` is NaN wherever ``logsumexp`` is infinite (a
row holding +inf, or only -inf), which makes the whole row NaN as eager's softmax and
log-softmax make it. Only rows of at least ``MIN_ROW`` elements are rewritten (vocabularies;
attention-length rows keep their op: measured on the GPU for vocabularies only).
"""

from __future__ import annotations

import torch
from torch import fx

from danlu_aotautograd.partition.graph_split import JointParts
from danlu_aotautograd.tracing.shadow_tensor import run_fake

aten = torch.ops.aten

MIN_ROW = 4096

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _static_shape(val) -> bool:
    return isinstance(val, torch.Tensor) and all(isinstance(s, int) for s in val.shape)


def split_softmax_rows(joint: fx.GraphModule, *, num_fw_outputs: int) -> int:
    """Rewrite the long-row softmaxes whose output the backward reads; returns how many."""
    graph = joint.graph
    targets = (aten._log_softmax.default, aten._softmax.default)
    candidates = [n for n in graph.nodes if n.op == "call_function" and n.target in targets]
    if not candidates:
        return 0
    dependent = JointParts.of(joint, num_fw_outputs).tangent_dependent
    rewritten = 0
    for node in candidates:
        if node in dependent or not _read_by_backward(node, dependent):
            continue  # a backward op itself, or an output the backward never reads
        x, dim = node.args[0], node.args[1]
        out_val, x_val = node.meta.get("val"), x.meta.get("val")
        if not (_static_shape(out_val) and _static_shape(x_val)) or out_val.dim() == 0:
            continue
        dim = dim % out_val.dim()
        if out_val.shape[dim] < MIN_ROW or not out_val.dtype.is_floating_point:
            continue
        with graph.inserting_before(node):
            new = _Builder(graph)
            xc = x
            if x_val.dtype in _LOW_PRECISION:  # eager computes these in float32
                xc = new(aten._to_copy.default, (x,), {"dtype": torch.float32})
            lse = new(aten.logsumexp.default, (xc, [dim], True))
            infinite = new(aten.isinf.default, (lse,))
            norm = new(aten.masked_fill.Scalar, (lse, infinite, float("nan")))
            out = new(aten.sub.Tensor, (xc, norm))
            if node.target is aten._softmax.default:
                out = new(aten.exp.default, (out,))
            if out.meta["val"].dtype != out_val.dtype:
                out = new(aten._to_copy.default, (out,), {"dtype": out_val.dtype})
        out.meta.update({k: v for k, v in node.meta.items() if k != "val"})
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        graph.lint()
        joint.recompile()
    return rewritten


def _read_by_backward(node: fx.Node, dependent: set) -> bool:
    """Does the backward read ``node``, itself or through forward ops on it (the backward of
    log-softmax reads ``exp`` of the output, computed in the forward)?"""
    seen, todo = {node}, [node]
    while todo:
        for user in todo.pop().users:
            if user in dependent:
                return True
            if user not in seen and user.op != "output":
                seen.add(user)
                todo.append(user)
    return False


class _Builder:
    """Adds ATen calls with their fake values (``meta["val"]``, which the partitioner sizes
    and the compilers lay out)."""

    def __init__(self, graph: fx.Graph):
        self.graph = graph

    def __call__(self, target, args, kwargs=None) -> fx.Node:
        kwargs = kwargs or {}
        node = self.graph.call_function(target, args, kwargs)

        def val(a):
            return a.meta["val"] if isinstance(a, fx.Node) else a

        node.meta["val"] = run_fake(
            target,
            tuple(val(a) if not isinstance(a, list) else a for a in args),
            {k: val(v) for k, v in kwargs.items()},
        )
        return node
