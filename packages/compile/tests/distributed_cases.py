"""Distributed training cases, run by test_distributed.py in 2 processes (gloo, CPU).

Each case trains a compiled copy and an eager copy of the same model, wrapped the same way
(DDP or FSDP2), on the same data for a few optimizer steps, and reports whether losses,
gradients and parameters agree, and what was compiled (graphs, breaks, DDP splits).
"""

from __future__ import annotations

import copy
import logging
import os
import traceback

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab=64, d=32, layers=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for block in self.blocks:
            x = block(x)
        return nn.functional.cross_entropy(self.head(x).flatten(0, 1), ids.flatten())


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())
            for c_in, c_out in ((3, 8), (8, 16), (16, 16))
        )
        self.head = nn.Linear(16, 10)

    def forward(self, images):
        x = images
        for stage in self.body:
            x = stage(x)
        logits = self.head(x.mean((2, 3)))
        return nn.functional.cross_entropy(logits, torch.arange(images.shape[0]) % 10)


def _data(kind, rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    if kind == "transformer":
        return torch.randint(0, 64, (4, 16), generator=g)
    return torch.randn(4, 3, 8, 8, generator=g)


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def _full(p):
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def train_pair(kind, wrap, steps=3, accumulate=1, compile_outside=True):
    """Train eager and compiled copies; returns the comparison and what was compiled."""
    import danlu

    torch.manual_seed(0)
    base = Transformer() if kind == "transformer" else ConvNet()
    eager_model, comp_model = copy.deepcopy(base), copy.deepcopy(base)
    eager = wrap(eager_model)
    if compile_outside:
        compiled = danlu.compile(wrap(comp_model))
    else:
        compiled = wrap(danlu.compile(comp_model))
    danlu_params = list(compiled.parameters())
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, compiled)]
    losses = []
    rank = dist.get_rank()
    for step in range(steps):
        for o in opts:
            o.zero_grad()
        pair = []
        for m in (eager, compiled):
            total = 0.0
            for micro in range(accumulate):
                x = _data(kind, rank, step * accumulate + micro)
                # gradient accumulation: all but the last micro-batch skip DDP's all-reduce
                sync = micro == accumulate - 1 or not hasattr(m, "no_sync")
                ctx = m.no_sync() if not sync else _null()
                with ctx:
                    loss = m(x)
                    loss.backward()
                total += float(loss)
            pair.append(total)
        grads_ok = all(
            _close(_full(p.grad), _full(q.grad))
            for p, q in zip(eager.parameters(), danlu_params)
            if p.grad is not None
        )
        for o in opts:
            o.step()
        losses.append((pair[0], pair[1], grads_ok))
    params_ok = all(_close(_full(p), _full(q)) for p, q in zip(eager.parameters(), danlu_params))
    stats = danlu.CompileStats.current()
    return {
        "losses_ok": all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b, _ in losses),
        "grads_ok": all(ok for _, _, ok in losses),
        "params_ok": params_ok,
        "graphs": len(stats.graphs),
        "breaks": stats.graph_breaks,
        "ddp_pieces": [len(s.pieces) for s in stats.ddp_splits if not s.reason],
        "ddp_not_split": [s.reason for s in stats.ddp_splits if s.reason],
        "kernels": sum(k.kernels for k in stats.kernel_graphs),
        "break_reasons": [b.reason for c in stats.captures for b in getattr(c, "breaks", ())],
    }


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _ddp(cap_mb):
    return lambda m: DDP(m, bucket_cap_mb=cap_mb)


def _fsdp2(m):
    from torch.distributed.fsdp import fully_shard

    for block in getattr(m, "blocks", getattr(m, "body", [])):
        fully_shard(block)
    fully_shard(m)
    return m


def collectives():
    """Collectives called inside a compiled function run eagerly at a graph break."""
    import danlu

    def all_reduce(x):
        t = x * 2
        dist.all_reduce(t)
        return t + 1

    def all_gather(x):
        out = torch.empty(dist.get_world_size() * x.shape[0], *x.shape[1:])
        dist.all_gather_into_tensor(out, x * 3)
        return out.sum(0)

    ok = True
    for fn in (all_reduce, all_gather):
        for _ in range(2):
            x = torch.randn(2, 3, generator=torch.Generator().manual_seed(dist.get_rank()))
            ok &= _close(danlu.compile(fn)(x.clone()), fn(x.clone()))
    stats = danlu.CompileStats.current()
    return {
        "losses_ok": ok,
        "grads_ok": ok,
        "params_ok": ok,
        "graphs": len(stats.graphs),
        "breaks": stats.graph_breaks,
        "ddp_pieces": [],
        "ddp_not_split": [],
        "kernels": sum(k.kernels for k in stats.kernel_graphs),
    }


CASES = {
    "ddp_transformer": lambda: train_pair("transformer", _ddp(0.02)),
    "ddp_convnet": lambda: train_pair("convnet", _ddp(0.005)),
    "ddp_one_bucket": lambda: train_pair("transformer", _ddp(25)),
    "ddp_inside_compile": lambda: train_pair("transformer", _ddp(0.02), compile_outside=False),
    "ddp_no_sync_accumulation": lambda: train_pair("transformer", _ddp(0.02), accumulate=2),
    "fsdp2_transformer": lambda: train_pair("transformer", _fsdp2),
    "fsdp2_convnet": lambda: train_pair("convnet", _fsdp2),
    "collectives_in_compiled_code": collectives,
}


def worker(rank, world, port, names, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import danlu

    split_log = _Records()
    logger = logging.getLogger("danlu_dynamo.ddp")  # the DANLU_LOGS=ddp topic
    logger.setLevel(logging.INFO)
    logger.addHandler(split_log)
    try:
        for name in names:
            danlu.reset()
            split_log.lines.clear()
            try:
                result = CASES[name]()
                result["ddp_log"] = list(split_log.lines)
                queue.put((rank, name, result))
            except Exception:  # noqa: BLE001 - the report carries the traceback
                queue.put((rank, name, {"error": traceback.format_exc()[-3000:]}))
    finally:
        dist.destroy_process_group()
