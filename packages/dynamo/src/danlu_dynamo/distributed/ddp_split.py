"""Captured graphs split at DistributedDataParallel's gradient buckets.

DDP all-reduces gradients bucket by bucket as autograd produces them, so communication
overlaps the rest of the backward. A captured graph compiled as one piece has one backward:
every gradient appears at its end, and no all-reduce can start before the whole backward is
done. When the graph is captured inside DDP's forward (DDP marks its module active then), the
graph is cut where DDP's buckets would fill, walking the graph backwards (the order of the
backward), and each piece is compiled on its own: one autograd node per piece, so each
bucket's gradients are ready, and reduced, while the earlier pieces' backward still runs.

The bucket size is the DDP instance's (``bucket_cap_mb``). A graph with symbolic sizes, or
one whose parameters fit one bucket, is not split. Where the graph is split is recorded on the
capture context (``ctx.ddp_splits``) and logged (``DANLU_LOGS=ddp``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import fx

log = logging.getLogger("danlu_dynamo.ddp")


@dataclass
class DDPSplit:
    """How one captured graph was split for DDP."""

    graph_nodes: int
    bucket_bytes: int
    pieces: list  # per piece: (number of nodes, parameter bytes)
    reason: str | None = None  # why it was not split, if it was not

    def describe(self) -> str:
        if self.reason:
            return f"not split ({self.reason})"
        sizes = ", ".join(f"{n} nodes/{b / 2**20:.2f} MiB" for n, b in self.pieces)
        return f"{len(self.pieces)} pieces for {self.bucket_bytes / 2**20:.2f} MiB buckets: {sizes}"


def active_ddp_module():
    """The DDP instance whose forward is running (torch marks it), or None."""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # pragma: no cover - builds without torch.distributed
        return None
    get = getattr(DistributedDataParallel, "_get_active_ddp_module", None)
    return get() if get is not None else None


def plan_pieces(gm: fx.GraphModule, example_inputs, params: dict, bucket_bytes: int) -> dict:
    """node -> piece index (in forward order), cutting where the parameters read since the
    last cut (walking backwards) reach ``bucket_bytes``. ``params``: id(tensor) -> bytes."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    param_of = {
        ph: id(t)
        for ph, t in zip(placeholders, example_inputs)
        if isinstance(t, torch.Tensor) and id(t) in params
    }
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    bucket_of: dict = {}
    bucket, filled, seen = 0, 0, set()
    for node in reversed(body):
        if filled >= bucket_bytes:
            bucket, filled = bucket + 1, 0
        bucket_of[node] = bucket
        for inp in node.all_input_nodes:
            pid = param_of.get(inp)
            if pid is not None and pid not in seen:
                seen.add(pid)
                filled += params[pid]
    last = max(bucket_of.values(), default=0)
    return {node: last - b for node, b in bucket_of.items()}


class _Piece(torch.nn.Module):
    """A compiled piece, callable from the split graph's ``call_module``."""

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)


def _symbolic(gm: fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        v = node.meta.get("val")
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(v, torch.Tensor) and v._has_symbolic_sizes_strides:
            return True
    return False


def _output_values(sub: fx.GraphModule):
    """A piece's results as fake values (its nodes keep the original graph's metadata)."""
    (out,) = [n for n in sub.graph.nodes if n.op == "output"]
    res = out.args[0]
    if isinstance(res, (tuple, list)):
        return type(res)(r.meta.get("val") if isinstance(r, fx.Node) else r for r in res)
    return res.meta.get("val") if isinstance(res, fx.Node) else res


def split_for_ddp(backend, gm: fx.GraphModule, example_inputs, ddp, record: list):
    """Compile ``gm`` as pieces at ``ddp``'s bucket boundaries (or whole when that does not
    apply); ``record`` gets a ``DDPSplit``."""
    nodes = sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output"))
    cap = int(getattr(ddp, "bucket_bytes_cap", 25 * 2**20))
    params = {id(p): p.numel() * p.element_size() for p in ddp.parameters() if p.requires_grad}

    def whole(reason):
        record.append(DDPSplit(nodes, cap, [(nodes, 0)], reason))
        log.info("DDP: captured graph of %d nodes %s", nodes, record[-1].describe())
        return backend(gm, example_inputs)

    if _symbolic(gm):
        return whole("symbolic sizes")
    piece_of = plan_pieces(gm, example_inputs, params, cap)
    count = max(piece_of.values(), default=0) + 1
    if count <= 1:
        return whole("its parameters fit one bucket")
    from torch.fx.passes.split_module import split_module

    try:
        split = split_module(gm, None, lambda n: piece_of[n], keep_original_order=True)
    except Exception as e:  # a graph split_module cannot cut: compile it whole
        return whole(f"split failed: {type(e).__name__}: {e}")
    values: dict = {}
    inputs = iter(example_inputs)
    pieces = []
    for node in split.graph.nodes:
        if node.op == "placeholder":
            values[node] = next(inputs)
        elif node.op == "call_module":
            sub = getattr(split, node.target)
            args = [values[a] for a in node.args]
            tensors_in = {id(a) for a in args if isinstance(a, torch.Tensor)}
            piece_bytes = sum(b for pid, b in params.items() if pid in tensors_in)
            body = sum(1 for n in sub.graph.nodes if n.op not in ("placeholder", "output"))
            pieces.append((body, piece_bytes))
            setattr(split, node.target, _Piece(backend(sub, args)))
            values[node] = _output_values(sub)
        elif node.op == "call_function":  # a piece's result taken apart (getitem)
            args = [values[a] if isinstance(a, fx.Node) else a for a in node.args]
            values[node] = node.target(*args)
    record.append(DDPSplit(nodes, cap, pieces))
    log.info("DDP: captured graph of %d nodes split into %s", nodes, record[-1].describe())
    split.recompile()
    return split


def ddp_split_backend(backend, record: list):
    """``backend`` that splits graphs captured inside a DDP forward at its buckets."""

    def ddp_aware_backend(gm, example_inputs):
        from danlu_dynamo import config

        ddp = active_ddp_module()
        if ddp is None or not config.ddp_split:
            return backend(gm, example_inputs)
        return split_for_ddp(backend, gm, example_inputs, ddp, record)

    ddp_aware_backend.__name__ = getattr(backend, "__name__", "backend")
    ddp_aware_backend.inner = backend
    for attr in ("danlu_phases",):
        if hasattr(backend, attr):
            setattr(ddp_aware_backend, attr, getattr(backend, attr))
    return ddp_aware_backend
