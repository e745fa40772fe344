"""Meta functions for view ops whose ATen kernels specialise symbolic arguments.

ATen's ``slice`` kernel turns a symbolic ``end`` into an int (a guard ``Eq(s0, 8)``), which
would tie every ``x[:, :n]`` and every ``split`` piece to the example size. Written here with
Python comparisons on SymInts instead, which value ranges usually decide without a guard.
"""

from __future__ import annotations

import sys

import torch

from .tensor import kernel_invocation

aten = torch.ops.aten


def slice_meta(mode, func, args, kwargs):
    self, dim, start, end, step = _slice_args(*args, **kwargs)
    dim = dim % self.dim() if self.dim() else 0
    size = self.shape[dim]
    start = 0 if start is None else start
    end = sys.maxsize if end is None else end
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    if start < 0:
        start = start + size
    if end < 0:
        end = end + size
    start = 0 if start < 0 else (size if start > size else start)
    end = start if end < start else (size if end > size else end)
    length = (end - start + step - 1) // step
    sizes = list(self.shape)
    strides = list(self.stride())
    sizes[dim] = length
    offset = self.storage_offset() + start * strides[dim]
    strides[dim] = strides[dim] * step
    with kernel_invocation():
        return self.as_strided(sizes, strides, offset)


def _slice_args(self, dim=0, start=None, end=None, step=1):
    return self, dim, start, end, step


SYMBOLIC_VIEW_META = {aten.slice.Tensor: slice_meta}
