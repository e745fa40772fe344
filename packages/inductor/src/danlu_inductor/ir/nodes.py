"""IR nodes: loops (Pointwise, Reduction), buffers, the storage box and lazy views.

Lowerings return ``StorageBox`` or ``View`` objects. A ``StorageBox`` holds either an
unmaterialized ``Loops`` (inlined into every consumer through ``make_loader``) or a
``Buffer``; ``realize()`` turns its loops into a ``ComputedBuffer`` that the scheduler will
compute once. Views never copy: they rewrite indices on the way to their base's loader.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import sympy
import torch

from danlu_inductor.ir.layout import FixedLayout, FlexibleLayout, Layout
from danlu_inductor.ir.ops import GPU_CHEAP_MATH, OpCounter, Printer, V, ops
from danlu_inductor.ir.symbols import (
    affine_coefficients,
    as_exprs,
    index_vars,
    product,
    simplify_index,
)

# ---------------------------------------------------------------- the graph being lowered


class _Current(threading.local):
    graph = None


_current = _Current()


def current_graph():
    if _current.graph is None:
        raise RuntimeError("no graph is being lowered")
    return _current.graph


# ------------------------------------------------------------------------------- loops


class Loops:
    """A computation described per output element by ``inner_fn``."""

    def __init__(self, dtype: torch.dtype, ranges: Sequence, inner_fn: Callable):
        self.dtype = dtype
        self.ranges = as_exprs(ranges)
        self.inner_fn = inner_fn

    def get_size(self):
        return self.ranges

    def count_ops(self) -> OpCounter:
        counter = OpCounter()
        with V.set_handler(counter):
            self.call_body(counter)
        return counter

    def dump_body(self) -> list[str]:
        printer = Printer()
        with V.set_handler(printer):
            result = self.call_body(printer)
        printer.lines.append(f"return {result}")
        return printer.lines


class Pointwise(Loops):
    def make_loader(self):
        return self.inner_fn

    def call_body(self, _handler):
        return self.inner_fn(index_vars("x", len(self.ranges)))

    def reduction_ranges(self):
        return []


# Reduction types. ``softmax_max`` and ``softmax_sum`` are one pass over a row: its max and the
# sum of exp(value - max), kept as a running max and a rescaled running sum (lowering/softmax.py).
REDUCTION_TYPES = (
    "sum",
    "prod",
    "max",
    "min",
    "argmax",
    "argmin",
    "any",
    "all",
    "welford_mean",
    "welford_m2",
    "softmax_max",
    "softmax_sum",
)


class Reduction(Loops):
    """``ranges`` are the kept (output) dims, ``reduction_ranges`` the reduced ones.

    ``inner_fn(index, rindex)`` computes one input element of the reduction. ``welford_*``
    reductions share one Welford accumulator when they reduce the same value in one kernel;
    ``softmax_*`` ones share one running (max, sum) pair the same way.
    """

    def __init__(self, dtype, ranges, reduction_ranges, reduction_type, inner_fn, src_dtype):
        super().__init__(dtype, ranges, inner_fn)
        assert reduction_type in REDUCTION_TYPES, reduction_type
        self.rranges = as_exprs(reduction_ranges)
        self.reduction_type = reduction_type
        self.src_dtype = src_dtype
        # the first stage of a column sum chunked by a row kernel's block of rows: fusable
        # into that kernel (lowering/row_block_partials.py); None otherwise
        self.row_block: int | None = None

    def reduction_ranges(self):
        return self.rranges

    def call_body(self, _handler):
        return self.inner_fn(index_vars("x", len(self.ranges)), index_vars("r", len(self.rranges)))


# ----------------------------------------------------------------------------- buffers


class Buffer:
    # Where this buffer's data pointer sits in its storage, in elements: the layout's offsets
    # count from the data pointer, an ``as_strided`` storage offset from the storage's start.
    # Nonzero only for inputs and constants that are views (fixed per compilation, since the
    # input signature holds it) and for library results that are views (lowering/extern.py).
    storage_offset = 0

    def __init__(self, name: str | None, layout: Layout):
        self.name = name
        self.layout = layout
        self.origins: list[str] = []  # FX node names this buffer was computed from

    def get_name(self):
        return self.name

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def make_loader(self):
        name, layout = self.name, self.layout

        def loader(index):
            return ops.load(name, layout.index(index))

        return loader

    def __repr__(self):
        return f"{type(self).__name__}({self.name}, {self.layout})"


class InputBuffer(Buffer):
    pass


class ConstantBuffer(Buffer):
    def __init__(self, name, layout, value: torch.Tensor):
        super().__init__(name, layout)
        self.value = value


class ComputedBuffer(Buffer):
    """A buffer whose contents a loop nest (Pointwise or Reduction) computes."""

    def __init__(self, name, layout, data: Loops):
        super().__init__(name, layout)
        self.data = data

    def is_reduction(self):
        return isinstance(self.data, Reduction)

    def dump(self) -> str:
        d = self.data
        kind = type(d).__name__
        head = f"{self.name}: {kind}(ranges=[{', '.join(map(str, d.ranges))}]"
        if isinstance(d, Reduction):
            head += (
                f", reduction_ranges=[{', '.join(map(str, d.rranges))}], type={d.reduction_type}"
            )
        head += f")  {self.layout}"
        if self.origins:
            head += f"  # from {', '.join(self.origins)}"
        body = "\n".join("    " + line for line in d.dump_body())
        return head + "\n" + body


class ExternKernel(Buffer):
    """A call into ATen: library kernels (mm, convolution, attention) and fallbacks.

    ``args``/``kwargs`` hold IR nodes (realized buffers or strided views of them) and plain
    Python values; the wrapper prints the call. ``layout`` is None for multi-output kernels,
    whose results are read through ``MultiOutput`` buffers.
    """

    def __init__(self, name, layout, op, args, kwargs, kind: str, mutates=()):
        super().__init__(name, layout)
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.kind = kind  # "extern" (library kernel) or "fallback" (op we do not lower)
        self.mutates = list(mutates)  # buffer names this call writes in place

    def input_buffers(self) -> list[str]:
        names = []

        def visit(a):
            if isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
            elif isinstance(a, ReinterpretView):
                names.append(a.buffer.get_name())
            elif isinstance(a, Buffer):
                names.append(a.get_name())

        visit(self.args)
        visit(list(self.kwargs.values()))
        return names

    def dump(self) -> str:
        what = "fallback" if self.kind == "fallback" else "extern"
        org = f"  # from {', '.join(self.origins)}" if self.origins else ""
        ins = ", ".join(self.input_buffers())
        lay = self.layout if self.layout is not None else "multi-output"
        return f"{self.name}: {what} {self.op}({ins})  {lay}{org}"


class MultiOutput(Buffer):
    """Output ``path`` (a tuple of indices) of a multi-output extern kernel."""

    def __init__(self, name, layout, parent: ExternKernel, path: tuple):
        super().__init__(name, layout)
        self.parent = parent
        self.path = path

    def dump(self) -> str:
        sel = "".join(f"[{i}]" for i in self.path)
        return f"{self.name} = {self.parent.name}{sel}  {self.layout}"


class ReinterpretView:
    """A strided view of a realized buffer (what extern kernels receive for views)."""

    def __init__(self, buffer: Buffer, layout: FixedLayout):
        self.buffer = buffer
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype


# ------------------------------------------------------------------- boxes and views


class StorageBox:
    """Holds loops until someone needs them in memory, then the buffer that stores them."""

    def __init__(self, data):
        self.data = data
        self.users = 0

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.dtype if isinstance(self.data, Loops) else self.data.get_dtype()

    def make_loader(self):
        return self.data.make_loader()

    def is_realized(self):
        return isinstance(self.data, Buffer)

    def realize(self, stride=None) -> Buffer:
        if isinstance(self.data, Buffer):
            return self.data
        layout = FlexibleLayout(self.get_dtype(), self.get_size())
        if stride is None:
            stride = getattr(self, "preferred_stride", None)
        if stride is not None:
            layout = layout.fix(stride)
        buf = ComputedBuffer(None, layout, self.data)
        current_graph().register_buffer(buf)
        self.data = buf
        return buf

    def maybe_realize_for_reuse(self):
        """Store a shared value once instead of recomputing it in every consumer when it is
        expensive (heavy math, many loads, long bodies)."""
        if isinstance(self.data, Pointwise):
            c = self.data.count_ops()
            if getattr(_current.graph, "for_gpu", False):
                # GPU kernels are bound by memory: arithmetic is nearly free, so only values
                # that read much or compute costly math are stored (a loss gradient over a
                # vocabulary, ~30 ops on per-row loads, would otherwise be written and read
                # back in float32). exp and log are recomputed: softmax's exp(x - max), read
                # by its sum and its division, stored and read back was two of the five passes
                # over a long row (softmax_long_rows: 53.8 us against eager's 31.3)
                costly = c.heavy_ops - GPU_CHEAP_MATH
                expensive = bool(costly) or len(c.distinct_loads) > 4 or c.count > 64
            else:
                expensive = c.heavy or c.loads > 4 or c.count > 24
            if expensive:
                self.realize()

    def unwrap_buffer(self):
        return self.data if isinstance(self.data, Buffer) else None


class View:
    """A lazy view: ``reindex`` maps an index of this view to an index of ``base``."""

    def __init__(self, base, size, reindex: Callable, dtype=None):
        self.base = base
        self.size = as_exprs(size)
        self.reindex = reindex

    def get_size(self):
        return self.size

    def get_dtype(self):
        return self.base.get_dtype()

    def make_loader(self):
        inner = self.base.make_loader()
        reindex = self.reindex

        def loader(index):
            return inner(reindex(index))

        return loader

    def realize(self, stride=None):
        return realize_input(self)

    def storage_box(self):
        b = self.base
        while isinstance(b, View):
            b = b.base
        return b


def is_loops(node) -> bool:
    return isinstance(node, StorageBox) and isinstance(node.data, Loops)


class _LoadRecorder:
    def __init__(self):
        self.loads = []
        self.other = 0

    def __getattr__(self, name):
        def op(*args):
            if name == "load":
                self.loads.append((args[0], args[1]))
            elif name == "indirect_indexing":
                self.other += 1
                return sympy.Symbol(f"ind{self.other}", integer=True)
            else:
                self.other += 1
            return name

        return op


def as_strided_view(node) -> ReinterpretView | Buffer | None:
    """The node as a strided view of one realized buffer, if its indexing is affine."""
    if isinstance(node, StorageBox):
        return node.data if isinstance(node.data, Buffer) else None
    if isinstance(node, Buffer):
        return node
    if not isinstance(node, View):
        return None
    box = node.storage_box()
    if not isinstance(box, StorageBox) or not isinstance(box.data, Buffer):
        return None
    size = node.get_size()
    idx = index_vars("v", len(size))
    rec = _LoadRecorder()
    with V.set_handler(rec):
        node.make_loader()(idx)
    if len(rec.loads) != 1 or rec.other:
        return None
    name, expr = rec.loads[0]
    if name != box.data.get_name():
        return None
    got = affine_coefficients(simplify_index(expr), idx)
    if got is None:
        return None
    coeffs, const = got
    if not all(never_negative(c) for c in (*coeffs, const)):
        return None
    return ReinterpretView(box.data, FixedLayout(node.get_dtype(), size, coeffs, const))


def never_negative(e) -> bool:
    """``e >= 0`` for every size (symbolic strides, offsets, paddings: decided by the trace's
    ranges)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return int(e) >= 0
    env = getattr(_current.graph, "shape_env", None)
    return env is not None and env.static_value(sympy.Ge(e, 0)) is True


def realize_input(node, stride=None):
    """A Buffer or ReinterpretView holding ``node``'s values (copies only if it must)."""
    if isinstance(node, StorageBox):
        return node.realize(stride)
    if isinstance(node, View):
        view = as_strided_view(node)
        if view is not None:
            return view
        box = node.storage_box()
        if is_loops(box):  # realize the base, then the view may become strided
            box.realize()
            view = as_strided_view(node)
            if view is not None:
                return view
        copy = StorageBox(Pointwise(node.get_dtype(), node.get_size(), node.make_loader()))
        return copy.realize(stride)
    if isinstance(node, (Buffer, ReinterpretView)):
        return node
    raise TypeError(f"cannot realize {node!r}")


def numel(node) -> sympy.Expr:
    return product(node.get_size())
