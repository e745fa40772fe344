"""Scaled dot-product attention on CUDA fakes with symbolic sizes.

On CUDA, ATen's ``scaled_dot_product_attention`` picks its kernel in C++ from the concrete
sizes of its inputs, which specialises every symbolic size it reads (a sequence length
becomes a constant, and each new length recompiles). The output's metadata does not depend
on that choice, so for symbolic CUDA fakes it is computed here from ops that keep sizes
symbolic: the attention product in math form (autograd sees the inputs), laid out as the
fused kernels lay it out ([batch, seq, heads, dim] in memory).
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger("danlu_primtorch.symbolic")

# the builtin, and the Python function some torch versions wrap around it
SDPA = frozenset(
    f
    for f in (
        torch._C._nn.scaled_dot_product_attention,
        getattr(torch.nn.functional, "scaled_dot_product_attention", None),
    )
    if f is not None
)


def is_sdpa(func) -> bool:
    return func in SDPA or getattr(func, "__name__", None) == "scaled_dot_product_attention"


def _symbolic(t) -> bool:
    return isinstance(t, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in t.shape)


def symbolic_cuda_sdpa(args, kwargs):
    """The example output, or None when ATen's own path serves (no symbolic CUDA input)."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    q, k, v = bound.get("query"), bound.get("key"), bound.get("value")
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return None
    if not any(_symbolic(t) for t in (q, k, v)):
        return None
    device = getattr(q, "fake_device", q.device)
    if device.type != "cuda" or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        log.debug("attention on symbolic fakes left to ATen: %s, dims %s", device, q.dim())
        return None
    if bound.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k = k.repeat_interleave(groups, dim=-3)
        v = v.repeat_interleave(groups, dim=-3)
    scores = torch.matmul(q, k.transpose(-2, -1))
    out = torch.matmul(scores.softmax(-1), v)
    # the fused kernels write [batch, seq, heads, dim]
    return out.transpose(1, 2).contiguous().transpose(1, 2)
