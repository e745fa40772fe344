"""The loop IR's well-formedness checker.

``verify_graph(graph, scheduler)`` runs every loop body that will become code under a handler
that records its loads and the dtype of every value, and checks:

- **Indices in range.** Every load index and every store index, evaluated over the body's
  iteration ranges, stays inside the memory its buffer's layout spans (``[0, extent)``; for
  graph inputs and constants from ``-storage_offset`` to the end of the example's storage,
  since ``as_strided`` counts from the storage's start). Bounds come from interval arithmetic
  on the index expression (exact for affine indices; ``FloorDiv``/``IMod``/``Clamp``/
  ``Min``/``Max`` are monotone and bounded soundly). Where the interval says "out of range"
  but the index is not affine (so the interval may be loose), the index is evaluated at every
  point of its variables' ranges when there are at most ``ENUMERATE_LIMIT`` points, else the
  check is skipped and recorded in ``report.skipped``. Strided views handed to library
  kernels (``ReinterpretView``) are checked the same way, and a loop's ranges must equal its
  buffer's sizes.
- **Reads defined before use.** A load, a library kernel's input and a graph output must name
  a graph input, a constant or a buffer computed earlier in schedule order (inside a fused
  kernel: by a member that runs before the reader, and a reduction only in an earlier loop).
- **Dtypes consistent.** A stored value has its buffer's dtype (a reduction's value its
  ``src_dtype``; argmax/argmin produce int64, any/all bool); binary arithmetic,
  comparisons, ``where``'s two values and bitwise ops get operands of one dtype (lowerings
  make torch's type promotion explicit with ``to_dtype``); ``where``'s condition and logical
  ops' operands are bool; transcendental math and ``truediv`` get floats; bitwise ops and
  ``indirect_indexing`` get integers.

Skipped (not checked): symbolic sizes are checked at the trace's size hints only (the sizes
of the first call), not for every size; an indirect index (a gather) is assumed to lie in
``[0, size)`` as ``indirect_indexing`` promises (the kernels wrap and clamp it and raise
IndexError); library and fallback kernels' own memory accesses; whether an index hits an
element of a strided layout (only the span is checked).

Enabled by the ``verify_ir`` option of ``compile_fx`` or ``DANLU_VERIFY_IR=1`` (see
``options.py``); the scheduler calls it once fusion and kernel order are decided.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import sympy
import torch

from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.ops import ALL_OPS, BINARY, V
from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod, hint, index_vars

ENUMERATE_LIMIT = 1 << 16
# graphs checked and seconds spent, in this process (the test suite reports its cost)
STATS = {"graphs": 0, "seconds": 0.0}


class IRVerificationError(AssertionError):
    """The loop IR is malformed: the message names the buffer, the index and the range."""


@dataclass
class VerifyReport:
    bodies: int = 0  # loop bodies checked
    accesses: int = 0  # loads and stores whose index was checked
    enumerated: int = 0  # non-affine indices checked point by point
    skipped: list[str] = field(default_factory=list)  # checks that could not be made, and why


# ------------------------------------------------------------------------ index bounds


def _num(v):
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, sympy.Rational):
        return Fraction(int(v.p), int(v.q))
    raise TypeError(v)


def _floor(v):
    return v.numerator // v.denominator if isinstance(v, Fraction) else v


def bounds(expr, ranges: dict) -> tuple | None:
    """(lo, hi) of ``expr`` when each symbol ``s`` in ``ranges`` runs over
    ``ranges[s] = (lo, hi)``; size symbols take their hint. None when it cannot be bounded."""
    if isinstance(expr, int):
        return expr, expr
    if expr.is_Number:
        if not expr.is_Rational:
            return None
        v = _num(expr)
        return v, v
    if expr.is_Symbol:
        if expr in ranges:
            return ranges[expr]
        try:
            v = hint(expr)
        except Exception:
            return None
        return v, v
    args = [bounds(a, ranges) for a in expr.args]
    if any(a is None for a in args):
        return None
    if isinstance(expr, sympy.Add):
        return sum(a[0] for a in args), sum(a[1] for a in args)
    if isinstance(expr, sympy.Mul):
        lo, hi = args[0]
        for a_lo, a_hi in args[1:]:
            corners = (lo * a_lo, lo * a_hi, hi * a_lo, hi * a_hi)
            lo, hi = min(corners), max(corners)
        return lo, hi
    if isinstance(expr, FloorDiv):
        (a_lo, a_hi), (b_lo, b_hi) = args
        if b_lo <= 0:
            return None
        # monotone in each argument (increasing in a; in b: decreasing for a >= 0)
        corners = [_floor(Fraction(a) / b) for a in (a_lo, a_hi) for b in (b_lo, b_hi)]
        return min(corners), max(corners)
    if isinstance(expr, IMod):
        (a_lo, a_hi), (b_lo, b_hi) = args
        if b_lo <= 0:
            return None
        if a_lo >= 0 and a_hi < b_lo:
            return a_lo, a_hi
        if a_lo >= 0:
            return 0, b_hi - 1
        return -(b_hi - 1), b_hi - 1  # C's % takes the dividend's sign
    if isinstance(expr, Clamp):
        (a_lo, a_hi), (lo_lo, lo_hi), (hi_lo, hi_hi) = args
        return min(max(a_lo, lo_lo), hi_lo), min(max(a_hi, lo_hi), hi_hi)
    if isinstance(expr, sympy.Max):
        return max(a[0] for a in args), max(a[1] for a in args)
    if isinstance(expr, sympy.Min):
        return min(a[0] for a in args), min(a[1] for a in args)
    if isinstance(expr, sympy.Pow):
        (b_lo, b_hi), (e_lo, e_hi) = args
        if e_lo == e_hi and isinstance(e_lo, int) and e_lo >= 0 and b_lo >= 0:
            return b_lo**e_lo, b_hi**e_lo
        return None
    return None


def _is_affine(expr, variables) -> bool:
    if expr.atoms(FloorDiv, IMod, Clamp, sympy.Min, sympy.Max):
        return False
    try:
        poly = sympy.Poly(expr, *variables)
    except sympy.PolynomialError:
        return False
    return poly.total_degree() <= 1


def _as_t(v):
    return v if isinstance(v, torch.Tensor) else torch.tensor(int(v))


def _fold(fn, args):
    out = _as_t(args[0])
    for a in args[1:]:
        out = fn(out, _as_t(a))
    return out


# index functions on int64 tensors, with the kernels' semantics (``%`` truncates like C)
_TORCH_FUNCS = {
    "FloorDiv": lambda a, b: torch.div(_as_t(a), b, rounding_mode="floor"),
    "IMod": lambda a, b: torch.fmod(_as_t(a), b),
    "Clamp": lambda a, lo, hi: torch.clamp(_as_t(a), int(lo), int(hi)),
    "Max": lambda *a: _fold(torch.maximum, a),
    "Min": lambda *a: _fold(torch.minimum, a),
}
_TORCH_FUNCS["SelectedClamp"] = _TORCH_FUNCS["Clamp"]  # a Clamp the code generator may mask


def _enumerate_bounds(expr, ranges: dict):
    """Exact (lo, hi) of ``expr`` over every point of its variables' ranges, or None when there
    are more than ``ENUMERATE_LIMIT`` points."""
    free = sorted((s for s in expr.free_symbols if s in ranges), key=lambda s: s.name)
    total = 1
    for s in free:
        total *= max(int(ranges[s][1]) - int(ranges[s][0]) + 1, 0)
    if not free or total > ENUMERATE_LIMIT or total == 0:
        return None
    hints_sub = {}
    for s in expr.free_symbols - set(free):
        try:
            hints_sub[s] = sympy.Integer(hint(s))
        except Exception:
            return None
    e = expr.xreplace(hints_sub) if hints_sub else expr
    fn = sympy.lambdify(free, e, modules=[_TORCH_FUNCS, "math"])
    grids = torch.meshgrid(
        *[torch.arange(int(ranges[s][0]), int(ranges[s][1]) + 1) for s in free], indexing="ij"
    )
    vals = _as_t(fn(*grids)).expand(grids[0].shape)
    return int(vals.min()), int(vals.max())


# ------------------------------------------------------------------ dtype propagation


class _Val:
    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"<{str(self.dtype).replace('torch.', '')} value>"


_FLOAT_MATH = frozenset(
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erf erfc lgamma sigmoid reciprocal truediv atan2 hypot copysign "
    "nextafter".split()
)
_BITWISE = frozenset("bitwise_and bitwise_or bitwise_xor lshift rshift bitwise_not".split())
_COMPARE = frozenset("eq ne lt le gt ge".split())
_LOGICAL = frozenset("logical_and logical_or logical_xor logical_not".split())
_TO_BOOL = frozenset("isnan isinf signbit".split())


def _dt(d) -> str:
    return str(d).replace("torch.", "")


class _CheckHandler:
    """Runs a body: records loads (with indirect index ranges) and checks op dtypes."""

    def __init__(self, where: str, dtype_of):
        self.context = where
        self.dtype_of = dtype_of  # buffer name -> dtype (or None: unknown name)
        self.loads: list[tuple[str, sympy.Expr]] = []
        self.indirect: dict[sympy.Symbol, tuple] = {}

    def _fail(self, msg):
        raise IRVerificationError(f"{self.context}: {msg}")

    def _val(self, op, v):
        if not isinstance(v, _Val):
            self._fail(f"ops.{op} got {v!r}, which is not a value of the body")
        return v.dtype

    # memory and values
    def load(self, name, index):
        self.loads.append((name, index))
        dtype = self.dtype_of(name)
        if dtype is None:
            self._fail(f"load of {name!r}, which is no graph input, constant or buffer")
        return _Val(dtype)

    def constant(self, value, dtype):
        return _Val(dtype)

    def index_expr(self, expr, dtype):
        return _Val(dtype)

    def to_dtype(self, v, dtype):
        self._val("to_dtype", v)
        return _Val(dtype)

    def indirect_indexing(self, v, size, checked=True):
        dt = self._val("indirect_indexing", v)
        if dt.is_floating_point or dt == torch.bool:
            self._fail(f"indirect_indexing of a {_dt(dt)} value (needs an integer)")
        s = sympy.Symbol(f"indirect{len(self.indirect)}", integer=True)
        try:
            n = hint(size)
        except Exception:
            n = None
        self.indirect[s] = (0, n - 1) if n is not None else None
        return s

    def where(self, c, a, b):
        dc, da, db = (self._val("where", x) for x in (c, a, b))
        if dc != torch.bool:
            self._fail(f"ops.where with a {_dt(dc)} condition (needs bool)")
        if da != db:
            self._fail(f"ops.where chooses between {_dt(da)} and {_dt(db)} values")
        return _Val(da)

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(name)
        binary = name in BINARY

        def op(*args):
            if len(args) != (2 if binary else 1):
                self._fail(f"ops.{name} got {len(args)} operands")
            dts = [self._val(name, a) for a in args]
            if binary and name not in _LOGICAL and dts[0] != dts[1]:
                self._fail(f"ops.{name} of {_dt(dts[0])} and {_dt(dts[1])} operands")
            d = dts[0]
            if name in _FLOAT_MATH and not d.is_floating_point:
                self._fail(f"ops.{name} of {_dt(d)} operands (needs a float dtype)")
            if name in _BITWISE and d.is_floating_point:
                self._fail(f"ops.{name} of {_dt(d)} operands (needs integers or bool)")
            if name in _LOGICAL and any(x != torch.bool for x in dts):
                self._fail(f"ops.{name} of {', '.join(map(_dt, dts))} operands (needs bool)")
            if name in _COMPARE or name in _LOGICAL or name in _TO_BOOL:
                return _Val(torch.bool)
            return _Val(d)

        return op


# ------------------------------------------------------------------------- the checker


class _Verifier:
    def __init__(self, graph, scheduler=None):
        self.graph = graph
        self.scheduler = scheduler
        self.report = VerifyReport()
        self._extent_cache: dict[str, tuple] = {}
        self.position: dict[str, tuple] = {}  # buffer name -> its place in schedule order
        self.reductions: set[str] = set()

    # ---------------------------------------------------------------- what is defined
    def _order(self):
        """[(buffer, position)] of every buffer that becomes code, in schedule order."""
        out = []
        if self.scheduler is None:
            for i, buf in enumerate(self.graph.buffers):
                out.append((buf, (i, 0, 0)))
            return out
        for gi, g in enumerate(self.scheduler.groups):
            if g.is_extern:
                out.append((g.nodes[0].node, (gi, 0, 0)))
                continue
            phases = g.phases or g.compute_phases()
            for pi, (_, members) in enumerate(phases):
                for mi, n in enumerate(members):
                    out.append((n.node, (gi, pi, mi)))
        return out

    def _dtype_of(self, name):
        buf = self.graph.name_to_buffer.get(name)
        if buf is None or buf.layout is None:
            return None
        return buf.get_dtype()

    def _check_defined(self, reader: str, name: str, pos: tuple, what: str = "reads"):
        g = self.graph
        if name in g.graph_inputs or name in g.constants:
            return
        if name not in g.name_to_buffer:
            raise IRVerificationError(
                f"{reader} {what} {name!r}, which is no graph input, constant or buffer"
            )
        where = self.position.get(name)
        if where is None:
            raise IRVerificationError(
                f"{reader} {what} {name!r}, which is never computed (not scheduled)"
            )
        if where >= pos:
            raise IRVerificationError(
                f"{reader} {what} {name!r} before it is computed "
                f"(kernel {where[0]} loop {where[1]} writes it; the reader is at kernel "
                f"{pos[0]} loop {pos[1]})"
            )
        if (
            name in self.reductions
            and where[0] == pos[0]
            and where[1] == pos[1]
            and self.scheduler is not None
        ):
            raise IRVerificationError(
                f"{reader} {what} the reduction {name!r} inside the loop that computes it"
            )

    # ---------------------------------------------------------------- index ranges
    def _extent(self, name) -> tuple:
        """(lo, hi) of the element offsets ``name``'s memory holds, from its data pointer."""
        got = self._extent_cache.get(name)
        if got is not None:
            return got
        buf = self.graph.name_to_buffer[name]
        layout = buf.layout
        sizes = [hint(s) for s in layout.size]
        strides = [hint(s) for s in layout.stride]
        off = hint(layout.offset)
        if any(s == 0 for s in sizes):
            lo, hi = 0, -1
        else:
            lo = off + sum((n - 1) * st for n, st in zip(sizes, strides) if st < 0)
            hi = off + sum((n - 1) * st for n, st in zip(sizes, strides) if st > 0)
        storage = self._storage_of(name, buf)
        if storage is not None:  # as_strided may read anywhere in an input's storage
            lo = min(lo, -buf.storage_offset)
            hi = max(hi, storage - buf.storage_offset - 1)
        got = (lo, hi)
        self._extent_cache[name] = got
        return got

    def _storage_of(self, name, buf):
        if self.graph.shape_env is not None:
            return None  # symbolic inputs: asking for their storage would add a guard
        value = None
        if isinstance(buf, ir.ConstantBuffer):
            value = buf.value
        elif isinstance(buf, ir.InputBuffer):
            try:
                value = self.graph.example_inputs[self.graph.graph_input_names.index(name)]
            except (ValueError, IndexError):
                value = None
        if not isinstance(value, torch.Tensor) or value.device.type == "meta":
            return None
        try:
            return int(value.untyped_storage().nbytes()) // value.element_size()
        except Exception:  # fake or symbolic: the layout is all we know
            return None

    def _fits(self, index, ranges, lo, hi):
        """(True, bounds) if ``index`` stays in [lo, hi] over ``ranges``, (False, its exact or
        affine bounds) if not, None when it cannot be decided (recorded as skipped)."""
        b = bounds(index, ranges)
        if b is not None and lo <= b[0] and b[1] <= hi:
            return True, b
        if b is not None and _is_affine(index, list(ranges)):
            return False, b  # interval bounds of an affine index are exact
        e = _enumerate_bounds(index, ranges)
        if e is None:
            return None
        self.report.enumerated += 1
        return lo <= e[0] and e[1] <= hi, e

    def _check_index(self, where, name, index, ranges, kind):
        self.report.accesses += 1
        lo, hi = self._extent(name)
        if any(r is None for r in ranges.values()):
            self.report.skipped.append(f"{where}: {kind} {name}[{index}]: unbounded gather")
            return
        got = self._fits(index, ranges, lo, hi)
        if got is None:
            self.report.skipped.append(
                f"{where}: {kind} {name}[{index}]: non-affine index over too many points"
            )
            return
        ok, b = got
        if ok:
            return
        rng = ", ".join(f"{s} in [{a}, {z}]" for s, (a, z) in sorted(ranges.items(), key=str))
        raise IRVerificationError(
            f"{where}: {kind} of {name!r} at index {index} reaches [{b[0]}, {b[1]}] but "
            f"{name}'s layout {self.graph.name_to_buffer[name].layout} spans [{lo}, {hi}] "
            f"(iteration ranges: {rng or 'none'})"
        )

    # ---------------------------------------------------------------- one loop body
    def _check_body(self, buf: ir.ComputedBuffer, pos: tuple):
        name = buf.get_name()
        data = buf.data
        where = f"buffer {name} ({type(data).__name__}" + (
            f", from {', '.join(buf.origins)})" if buf.origins else ")"
        )
        self.report.bodies += 1
        sizes = list(data.ranges)
        if len(sizes) != len(buf.layout.size) or any(
            sympy.expand(a - b) != 0 for a, b in zip(sizes, buf.layout.size)
        ):
            raise IRVerificationError(
                f"{where}: loop ranges {sizes} differ from its layout's sizes "
                f"{list(buf.layout.size)}"
            )
        if data.dtype != buf.layout.dtype:
            raise IRVerificationError(
                f"{where}: loops compute {_dt(data.dtype)} but the buffer holds "
                f"{_dt(buf.layout.dtype)}"
            )
        xv = index_vars("x", len(sizes))
        rsizes = list(data.reduction_ranges())
        rv = index_vars("r", len(rsizes))
        ranges = {}
        for v, s in [*zip(xv, sizes), *zip(rv, rsizes)]:
            n = hint(s)
            if n <= 0:
                return  # an empty loop never runs its body
            ranges[v] = (0, n - 1)
        h = _CheckHandler(where, self._dtype_of)
        with V.set_handler(h):
            value = data.inner_fn(xv, rv) if isinstance(data, ir.Reduction) else data.inner_fn(xv)
        got = h._val("store", value)
        if isinstance(data, ir.Reduction):
            want = data.src_dtype
            if data.reduction_type in ("argmax", "argmin") and data.dtype != torch.int64:
                raise IRVerificationError(f"{where}: {data.reduction_type} into {_dt(data.dtype)}")
            if data.reduction_type in ("any", "all") and data.dtype != torch.bool:
                raise IRVerificationError(f"{where}: {data.reduction_type} into {_dt(data.dtype)}")
            if got != want:
                raise IRVerificationError(
                    f"{where}: reduces {_dt(got)} values but declares src_dtype {_dt(want)}"
                )
        elif got != buf.layout.dtype:
            raise IRVerificationError(
                f"{where}: stores a {_dt(got)} value into a {_dt(buf.layout.dtype)} buffer"
            )
        all_ranges = dict(ranges)
        all_ranges.update(h.indirect)
        for rname, index in h.loads:
            self._check_defined(f"{where}", rname, pos)
            self._check_index(where, rname, sympy.expand(index), all_ranges, "load")
        store_ranges = {v: ranges[v] for v in xv}
        self._check_index(where, name, buf.layout.index(xv), store_ranges, "store")

    def _check_view(self, where, view: ir.ReinterpretView):
        layout = view.layout
        vars_ = index_vars("v", len(layout.size))
        ranges = {}
        for v, s in zip(vars_, layout.size):
            n = hint(s)
            if n <= 0:
                return
            ranges[v] = (0, n - 1)
        self._check_index(where, view.buffer.get_name(), layout.index(vars_), ranges, "view")

    def _check_extern(self, buf, pos):
        name = buf.get_name()
        if isinstance(buf, ir.MultiOutput):
            self._check_defined(f"output {name}", buf.parent.get_name(), pos)
            return
        where = f"library call {name} ({buf.op})"
        for dep in buf.input_buffers():
            self._check_defined(where, dep, pos)

        def visit(a):
            if isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
            elif isinstance(a, ir.ReinterpretView):
                self._check_view(where, a)

        visit(buf.args)
        visit(list(buf.kwargs.values()))

    def _check_group(self, gi, g):
        """Each member's own loop index, as the fused kernel computes it from its loop
        variables (``reshape_index``), stays inside the member's ranges."""
        ranges = {}
        for v, s in [*zip(g.xvars, g.xsizes), *zip(g.rvars, g.rsizes)]:
            n = hint(s)
            if n <= 0:
                return
            ranges[v] = (0, n - 1)
        for n in g.nodes:
            idx, ridx = g.index_of(n)
            own = [*n.ranges, *n.rranges]  # rranges: [] unless a reduction
            for d, (e, size) in enumerate(zip([*idx, *ridx], own)):
                got = self._fits(sympy.expand(e), ranges, 0, hint(size) - 1)
                if got is None:
                    self.report.skipped.append(f"kernel {gi}: {n.name} dim {d}: {e} unbounded")
                    continue
                ok, b = got
                if not ok:
                    raise IRVerificationError(
                        f"kernel {gi} ({g.describe()}): member {n.name} placed "
                        f"{g.placements[n.name]!r} gets index {e} in dim {d}, reaching "
                        f"[{b[0]}, {b[1]}] outside its range [0, {hint(size) - 1}]"
                    )

    # ------------------------------------------------------------------------ all
    def run(self) -> VerifyReport:
        order = self._order()
        for buf, pos in order:
            self.position[buf.get_name()] = pos
            if isinstance(buf, ir.ComputedBuffer) and buf.is_reduction():
                self.reductions.add(buf.get_name())
        for buf, pos in order:
            if isinstance(buf, ir.ComputedBuffer):
                self._check_body(buf, pos)
            elif isinstance(buf, (ir.ExternKernel, ir.MultiOutput)):
                self._check_extern(buf, pos)
        if self.scheduler is not None:
            for gi, g in enumerate(self.scheduler.groups):
                if not g.is_extern and len(g.nodes) > 1:
                    self._check_group(gi, g)
        end = (len(order) + 1, 0, 0)
        for out in self.graph.graph_outputs:
            if isinstance(out, ir.ReinterpretView):
                self._check_defined("graph output", out.buffer.get_name(), end)
                self._check_view("graph output", out)
            elif isinstance(out, ir.Buffer):
                self._check_defined("graph output", out.get_name(), end)
        return self.report


def verify_graph(graph, scheduler=None) -> VerifyReport:
    """Check the loop IR of a lowered ``graph`` (a ``GraphLowering`` after ``run``), in the
    kernel order ``scheduler`` decided (creation order without one). Raises
    ``IRVerificationError``; returns what was checked and what was skipped."""
    t0 = time.perf_counter()
    try:
        return _Verifier(graph, scheduler).run()
    finally:
        STATS["graphs"] += 1
        STATS["seconds"] += time.perf_counter() - t0


__all__ = ["IRVerificationError", "VerifyReport", "bounds", "verify_graph"]
