"""Scaled dot-product attention on CUDA fakes with symbolic sizes.

On CUDA, ATen's ``scaled_dot_product_attention`` picks its kernel in C++ from the concrete
sizes of its inputs, which specialises every symbolic size it reads (a sequence length
becomes a constant, and each new length recompiles). The output's metadata does not depend
on that choice, so for symbolic CUDA fakes it is made here from ops that keep sizes symbolic
(a factory and elementwise ops: ``matmul``'s composite reads concrete sizes on CUDA too), laid
out as the fused kernels lay it out ([batch, seq, heads, dim] in memory).
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
    # no matmul: on CUDA builds its composite also reads concrete sizes
    b, h, seq = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((b, seq, h, v.shape[-1])).transpose(1, 2)  # the fused kernels' layout
    if any(t.requires_grad for t in (q, k, v)):
        # autograd sees the inputs (the value is metadata only)
        out = out + (q.sum() + k.sum() + v.sum()) * 0
    return out
