"""Matrix products on tensors with symbolic sizes, built from ops that keep the sizes symbolic.

``torch.matmul`` and ``F.linear`` are C++ composites: they pick among ``mm``, ``mv``, ``bmm`` and
folding a batch into rows by reading the inputs' sizes. Some of those reads are plain
``numel()`` calls, which a tensor with symbolic sizes refuses ("Cannot call numel() on tensor
with symbolic sizes/strides"); which ones run depends on the build and device (a CUDA trace of
``linear`` on a 4-d input meets one, the CPU trace of the same call does not). Inside a trace
with symbolic sizes, ``SymbolicCompositeMode`` computes these products here instead: the same
function, expressed with ``mm``/``addmm``/``bmm``/``mv``/``dot`` and views, every size a
``SymInt``. Autocast treats those ops as it treats ``matmul`` and ``linear`` (lower precision).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


def has_symbolic_sizes(*tensors) -> bool:
    return any(
        isinstance(t, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in t.shape)
        for t in tensors
    )


def _broadcast_batch(a_batch, b_batch) -> list:
    """torch's broadcasting of two batch shapes (a size-1 dim takes the other's size)."""
    n = max(len(a_batch), len(b_batch))
    a_batch = [1] * (n - len(a_batch)) + list(a_batch)
    b_batch = [1] * (n - len(b_batch)) + list(b_batch)
    out = []
    for x, y in zip(a_batch, b_batch):
        if isinstance(x, int) and x == 1:
            out.append(y)
        elif isinstance(y, int) and y == 1:
            out.append(x)
        else:
            if x != y:
                raise RuntimeError(f"matmul: batch sizes {x} and {y} do not broadcast")
            out.append(x)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul(a, b)`` with every size read symbolically."""
    da, db = a.dim(), b.dim()
    if da == 0 or db == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension")
    if da == 1 and db == 1:
        return torch.dot(a, b)
    if da == 2 and db == 1:
        return torch.mv(a, b)
    if da == 1 and db == 2:
        return torch.mm(a.unsqueeze(0), b).squeeze(0)
    if da == 2 and db == 2:
        return torch.mm(a, b)
    if da >= 3 and db <= 2:
        # fold the batch into rows: [..., n, k] @ [k, p] is one [(...*n), k] @ [k, p]
        rows = a.reshape(-1, a.shape[-1])
        if db == 1:
            return torch.mv(rows, b).view(a.shape[:-1])
        return torch.mm(rows, b).view(*a.shape[:-1], b.shape[-1])
    # batched: broadcast the batch dims, then one bmm
    a2 = a.unsqueeze(0) if da == 1 else a  # [k] -> [1, k]
    b2 = b.unsqueeze(-1) if db == 1 else b  # [k] -> [k, 1]
    batch = _broadcast_batch(a2.shape[:-2], b2.shape[:-2])
    n, k, p = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    lhs = a2.expand(*batch, n, k).reshape(-1, n, k)
    rhs = b2.expand(*batch, k, p).reshape(-1, k, p)
    out = torch.bmm(lhs, rhs).view(*batch, n, p)
    if da == 1:
        out = out.squeeze(-2)
    if db == 1:
        out = out.squeeze(-1)
    return out


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None):
    """``F.linear(x, weight, bias)`` with every size read symbolically."""
    if weight.dim() != 2 or x.dim() == 0:
        return NotImplemented
    if x.dim() == 1:
        out = torch.mv(weight, x)
        return out if bias is None else out + bias
    rows = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    if bias is None:
        out = torch.mm(rows, weight.t())
    else:
        out = torch.addmm(bias, rows, weight.t())
    return out if x.dim() == 2 else out.view(*x.shape[:-1], weight.shape[0])


def _linear_args(args, kwargs):
    names = ("input", "weight", "bias")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound.get("input"), bound.get("weight"), bound.get("bias")


_MATMUL = frozenset({torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__})
_LINEAR = frozenset({torch._C._nn.linear, torch.nn.functional.linear})


class SymbolicCompositeMode(TorchFunctionMode):
    """Routes ``matmul``/``@``/``linear`` on tensors with symbolic sizes through this module."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _MATMUL and len(args) == 2 and not kwargs and has_symbolic_sizes(*args):
            a, b = args
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                return matmul(a, b)
        elif func is torch.Tensor.__rmatmul__ and len(args) == 2 and has_symbolic_sizes(*args):
            b, a = args
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                return matmul(a, b)
        elif func in _LINEAR:
            x, weight, bias = _linear_args(args, kwargs)
            if isinstance(x, torch.Tensor) and has_symbolic_sizes(x, weight, bias):
                out = linear(x, weight, bias)
                if out is not NotImplemented:
                    return out
        return func(*args, **kwargs)
