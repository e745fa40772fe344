"""Scheduler nodes: one per buffer the graph computes, with its reads and placement rules."""

from __future__ import annotations

from functools import cached_property

import sympy

from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.symbols import FloorDiv, IMod, index_vars, product, same, same_sizes
from danlu_inductor.scheduler.dependencies import record_reads


def reshape_index(node_sizes, kernel_sizes, kernel_vars):
    """The node's index for kernel loop variables (equal numel, any dim split)."""
    from danlu_inductor.lowering.views import reshape_indexer

    if same_sizes(node_sizes, kernel_sizes):
        return list(kernel_vars)
    return reshape_indexer(node_sizes, kernel_sizes)(list(kernel_vars))


class BaseSchedulerNode:
    is_extern = False
    is_reduction = False

    def __init__(self, buf: ir.Buffer, order: int):
        self.node = buf
        self.name = buf.get_name()
        self.order = order  # creation order: a valid topological order
        self.deps: set[str] = set()  # scheduler node names this one must run after
        self.users: set[str] = set()

    @property
    def read_names(self) -> set[str]:
        return set()


class SchedulerNode(BaseSchedulerNode):
    """A ComputedBuffer: a Pointwise or Reduction loop nest."""

    def __init__(self, buf: ir.ComputedBuffer, order: int):
        super().__init__(buf, order)
        data = buf.data
        self.is_reduction = isinstance(data, ir.Reduction)
        self.ranges = list(data.ranges)
        self.rranges = list(data.reduction_ranges())

    @cached_property
    def reads(self):
        data = self.node.data
        xv, rv = index_vars("x", len(self.ranges)), index_vars("r", len(self.rranges))
        if self.is_reduction:
            return record_reads(data.inner_fn, xv, rv)
        return record_reads(data.inner_fn, xv)

    @property
    def read_names(self):
        return {d.name for d in self.reads}

    @cached_property
    def numel(self):
        return product(self.ranges)

    @cached_property
    def rnumel(self):
        return product(self.rranges)

    def placement(self, xsizes, rsizes, numels=None) -> str | None:
        """Where this node goes in a kernel over (xsizes, rsizes): "reduction", "xr" (inside
        the reduction loop), "x" (once per outer iteration), or None (does not fit).
        ``numels``: the products of xsizes and rsizes, when the caller has them."""
        xn, rn = numels or (product(xsizes), product(rsizes))
        if self.is_reduction:
            ok = same(self.numel, xn) and same(self.rnumel, rn) and rsizes
            if ok:
                return "reduction"
            return "xsum" if self._fits_row_blocks(xn, rn, rsizes) else None
        if same(self.numel, xn):
            return "x"
        if same(self.numel, xn * rn):
            return "xr"
        return None

    @property
    def row_block(self) -> int | None:
        return getattr(self.node.data, "row_block", None) if self.is_reduction else None

    def _fits_row_blocks(self, xn, rn, rsizes) -> bool:
        """A column sum's first stage (``[chunk, *columns]`` partials over ``row_block`` rows)
        in a row kernel over (rows, columns): each program sums its block of rows ("xsum")."""
        k = self.row_block
        if not k or not rsizes or len(self.rranges) != 1 or not same(self.rranges[0], k):
            return False
        if not all(isinstance(s, (int, sympy.Integer)) for s in (*self.ranges, xn, rn)):
            return False
        return same(product(self.ranges[1:]), rn) and same(self.ranges[0] * k, xn)

    def index_in_kernel(self, placement, xvars, rvars, xsizes, rsizes):
        """(node x index, node r index) as expressions of the kernel's loop variables."""
        if placement == "xsum":  # row x = chunk * row_block + r: chunk x // block, r x % block
            k = self.row_block
            flat, stride = sympy.Integer(0), sympy.Integer(1)
            for v, size in reversed(list(zip(xvars, xsizes))):
                flat += v * stride
                stride *= size
            columns = reshape_index(self.ranges[1:], rsizes, rvars)
            return [FloorDiv(flat, k), *columns], [IMod(flat, k)]
        if placement == "reduction":
            return (
                reshape_index(self.ranges, xsizes, xvars),
                reshape_index(self.rranges, rsizes, rvars),
            )
        if placement == "x":
            return self._pointwise_index(xsizes, xvars), []
        return self._pointwise_index([*xsizes, *rsizes], [*xvars, *rvars]), []

    def _pointwise_index(self, sizes, kernel_vars):
        """A pointwise member's index: its dims in its memory order when those are the
        kernel's dims (a channels-last [N, C, H, W] result in a row kernel over [N, H, W | C]:
        ConvNeXt's convolution output plus bias, stored for the backward beside its layer
        norm), else the flat reshape."""
        perm = self._memory_permutation(sizes)
        if perm is None:
            return reshape_index(self.ranges, sizes, kernel_vars)
        index = [None] * len(perm)
        for var, dim in zip(kernel_vars, perm):
            index[dim] = var
        return index

    def _memory_permutation(self, sizes) -> list[int] | None:
        """The node's dims from outermost to innermost in memory, when their sizes are
        ``sizes`` (static, no size-1 dims) but not in the node's logical order and its layout
        is fixed: ``perm[k]`` is the node dim that kernel dim ``k`` walks."""
        layout = self.node.layout
        if not isinstance(layout, ir.FixedLayout) or len(sizes) != len(self.ranges):
            return None
        dims = [*self.ranges, *layout.stride, *sizes]
        if not all(isinstance(s, (int, sympy.Integer)) for s in dims):
            return None
        ranges, wanted = [int(s) for s in self.ranges], [int(s) for s in sizes]
        if 1 in ranges or wanted == ranges:
            return None
        strides = [int(s) for s in layout.stride]
        if len(set(strides)) != len(strides):
            return None
        perm = sorted(range(len(ranges)), key=lambda d: -strides[d])
        return perm if [ranges[d] for d in perm] == wanted else None

    def write_index(self, index) -> sympy.Expr:
        return self.node.layout.index(index)

    def run_body(self, index, rindex):
        data = self.node.data
        return data.inner_fn(index, rindex) if self.is_reduction else data.inner_fn(index)


class ExternSchedulerNode(BaseSchedulerNode):
    is_extern = True

    @property
    def read_names(self):
        return set(self.node.input_buffers())


class MultiOutputSchedulerNode(BaseSchedulerNode):
    is_extern = True

    @property
    def read_names(self):
        return {self.node.parent.get_name()}
