"""Example values for traced tensors.

Tensor operations are run on ``meta`` tensors (shape, dtype, strides and autograd metadata,
no data), with the real device tracked beside them; an op without a meta kernel or whose
output shape depends on data raises, and the trace breaks there.  When
``danlu_primtorch.FakeTensorMode`` is available this is the one place to swap it in.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from .exc import Unsupported


def to_meta(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the same metadata as ``t`` (a leaf, like a graph input)."""
    if t.is_sparse or t.layout != torch.strided:
        raise Unsupported(f"non-strided tensor input ({t.layout})")
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {type(t).__name__}")
    m = torch.empty_strided(
        t.shape, t.stride(), dtype=t.dtype, device="meta", requires_grad=t.requires_grad
    )
    return m


def _devicify(x):
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


_DEVICE_METHODS_IDENTITY = {"cpu"}


def run_fake(fn, args, kwargs):
    """Run ``fn`` on meta example values; args/kwargs already hold meta tensors."""
    args = pytree.tree_map(_devicify, args)
    kwargs = {
        k: ("meta" if k == "device" and v is not None else _devicify(v)) for k, v in kwargs.items()
    }
    try:
        with torch.device("meta"):
            return fn(*args, **kwargs)
    except Unsupported:
        raise
    except Exception as e:
        # No meta kernel, a data-dependent output, or an error eager would raise too: in every
        # case the op runs eagerly after a graph break, which gives the user eager's behaviour.
        raise Unsupported(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {_short(e)}") from e


def _short(e) -> str:
    s = str(e).strip().splitlines()
    return s[0][:200] if s else type(e).__name__
