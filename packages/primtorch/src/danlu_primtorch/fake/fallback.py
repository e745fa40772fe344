"""Fallback for ops without a meta kernel: run them on zero-filled real CPU tensors.

Only when that is safe: the op neither mutates nor aliases its inputs (the outputs are fresh, so
their metadata is all that matters) and the inputs are small enough to allocate. Anything else
becomes a clear ``UnsupportedFakeOp``.
"""

from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_map

from .errors import UnsupportedFakeOp

# Largest total element count the fallback allocates (zero-filled) for one op.
MAX_FALLBACK_ELEMENTS = 1 << 24


def _mutates_or_aliases(func) -> bool:
    schema = func._schema
    for a in list(schema.arguments) + list(schema.returns):
        if a.alias_info is not None:
            return True
    return False


def run_on_zeros(func, args, kwargs, make_fake):
    """Run ``func`` on zero-filled CPU copies of the fake args; return fake outputs.

    ``make_fake(meta_tensor)`` wraps a meta tensor holding an output's metadata.
    """
    from .tensor import FakeTensor

    if _mutates_or_aliases(func):
        raise UnsupportedFakeOp(func, "no meta kernel, and the op mutates or aliases its inputs")
    total = 0

    def to_zeros(x):
        nonlocal total
        if isinstance(x, FakeTensor):
            total += math.prod(x.shape)
            if total > MAX_FALLBACK_ELEMENTS:
                raise UnsupportedFakeOp(func, "no meta kernel, and the inputs are too large to run")
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="cpu").zero_()
        if isinstance(x, torch.device) and x.type == "meta":
            return torch.device("cpu")
        return x

    with torch._C._DisableTorchDispatch():
        real_args, real_kwargs = tree_map(to_zeros, (args, kwargs))
        try:
            out = func(*real_args, **real_kwargs)
        except Exception as e:  # the op rejected zero inputs: say so, do not guess
            raise UnsupportedFakeOp(func, f"no meta kernel; running on zeros failed: {e}") from e

        def to_fake(x):
            if isinstance(x, torch.Tensor):
                meta = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
                return make_fake(meta)
            return x

        return tree_map(to_fake, out)
