"""Layouts: how a buffer's logical index maps to a storage offset.

``FixedLayout``: strides decided (inputs, extern kernel outputs, graph outputs that must
match eager strides). ``FlexibleLayout``: strides still free; contiguous unless someone fixes
them before code generation (``fix``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch

from danlu_inductor.ir.symbols import as_expr, as_exprs, contiguous_strides, hint, linear_index


class Layout:
    def __init__(self, dtype: torch.dtype, size: Sequence, stride: Sequence, offset=0):
        self.dtype = dtype
        self.size = as_exprs(size)
        self.stride = as_exprs(stride)
        self.offset = as_expr(offset)

    def index(self, index: Sequence[sympy.Expr]) -> sympy.Expr:
        # size-1 dims never move the offset, whatever their stride says.
        idx = [i if s != 1 else sympy.Integer(0) for i, s in zip(index, self.size)]
        return linear_index(idx, self.stride, self.offset)

    def storage_numel(self) -> sympy.Expr:
        if any(s == 0 for s in self.size):
            return sympy.Integer(0)
        return self.offset + 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))

    def has_strides(self, stride: Sequence) -> bool:
        """The strides are ``stride`` in every dim of size other than 1 (a size-1 dim's
        stride never moves the index)."""
        return all(a == b for a, b, s in zip(self.stride, stride, self.size) if s != 1)

    def is_contiguous(self) -> bool:
        return self.has_strides(contiguous_strides(self.size))

    def __repr__(self):
        dt = str(self.dtype).replace("torch.", "")
        sizes = ", ".join(map(str, self.size))
        strides = ", ".join(map(str, self.stride))
        off = f", offset={self.offset}" if self.offset != 0 else ""
        return f"{type(self).__name__}({dt}, size=[{sizes}], stride=[{strides}]{off})"


class FixedLayout(Layout):
    pass


class FlexibleLayout(Layout):
    def __init__(self, dtype, size):
        super().__init__(dtype, size, contiguous_strides(as_exprs(size)))

    def fix(self, stride: Sequence) -> FixedLayout:
        return FixedLayout(self.dtype, self.size, stride, 0)


def strides_for_order(size: Sequence, like_stride: Sequence) -> list:
    """Dense strides whose dimension order follows ``like_stride`` (eager's output strides
    for pointwise ops on permuted inputs); ties keep the logical order."""
    n = len(size)
    order = sorted(range(n), key=lambda d: (hint(like_stride[d]), -d))  # innermost first
    strides = [sympy.Integer(0)] * n
    acc = sympy.Integer(1)
    for d in order:
        strides[d] = acc
        s = as_expr(size[d])
        acc = acc * (max(int(s), 1) if s.is_Integer else s)  # symbolic sizes are >= 2
    return strides
