"""One fused group -> one ``@triton.jit`` kernel.

Pointwise groups flatten their outer space X into one axis of ``XBLOCK`` lanes per program.
Reduction groups are 2-D blocks ``[XBLOCK, RBLOCK]``: rows are outer indices, columns walk
the reduction space R. A reduction is *persistent* (all of R in one block, RBLOCK = next
power of two >= rnumel) when rnumel <= ``PERSISTENT_MAX_RNUMEL``, else *looped* (one loop
over R per phase, per-lane accumulators combined after the loop). A reduction whose reads are
contiguous along x and strided along R (``reads_along_x``) always loops, as an
*outer* reduction: many rows per program and a short R step, so lanes next to each other read
memory next to each other.

Values computed in the kernel are never re-read from memory inside it (another lane may own
the element): a later phase of a looped reduction recomputes what it needs from its loads.
Masks guard ragged edges; every load/store's mask matches the dims its pointer spans.
"""

from __future__ import annotations

import re

import sympy
import torch

from danlu_inductor.codegen.loop_order import memory_order, reads_along_x
from danlu_inductor.codegen.triton.heuristics import PERSISTENT_MAX_RNUMEL
from danlu_inductor.codegen.triton.overrides import TritonOverrides, TVar
from danlu_inductor.codegen.triton.printer import (
    SIGNATURE_TYPE,
    TL_DTYPE,
    compute_dtype,
    constant,
    literal,
    texpr,
    tl_compute,
)
from danlu_inductor.ir.ops import V
from danlu_inductor.ir.symbols import (
    Clamp,
    FloorDiv,
    IMod,
    SelectedClamp,
    as_exprs,
    hint,
    hint_of_name,
    is_static,
    simplify_index,
)

TILE_MIN = 16  # both sides of a 2-D pointwise tile span at least this many elements
INT32_MAX = 2**31 - 1
BIG_INDEX = 2**62
# what replaces the R mask in a looped reduction's loop over whole blocks
_UNMASKED = "rmask = tl.full([1, RBLOCK], 1, tl.int1)"
# symbols of symbolic sizes (the ShapeEnv's s0, s1, ...): i64 kernel arguments
_SIZE_SYMBOL = re.compile(r"\bs\d+\b")


def _finite_shift(m) -> str:
    """What a softmax row shifts by with max ``m``: ``m``, or 0 where ``m`` is -inf (a row
    that saw only -inf keeps a sum of 0 instead of NaN)."""
    return f"tl.where({m} == float('-inf'), 0.0, {m})"


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


class Block:
    """Straight-line code at one nesting level (the kernel body or one reduction loop)."""

    def __init__(self, parent=None):
        self.parent = parent
        self.lines: list[str] = []
        self.cache: dict[str, TVar] = {}

    def lookup(self, expr):
        b = self
        while b is not None:
            if expr in b.cache:
                return b.cache[expr]
            b = b.parent
        return None

    def sees(self, other) -> bool:
        b = self
        while b is not None:
            if b is other:
                return True
            b = b.parent
        return False


class TritonKernel:
    def __init__(self, group, kernel_name: str, buffer_dtype, local_buffers: set[str]):
        self.g = group
        self.kernel_name = kernel_name
        self.buffer_dtype = buffer_dtype
        self.local_buffers = set(local_buffers)
        # symbolic sizes: xnumel/rnumel are expressions, computed by the launcher at each
        # call; choices use the hints, and a symbolic reduction length always loops
        self.xsizes = as_exprs(group.xsizes)
        self.rsizes = as_exprs(group.rsizes)
        self.symbolic = not all(is_static(s) for s in (*self.xsizes, *self.rsizes))
        self.size_args: list[str] = []
        self.xnumel = _prod(self.xsizes)
        self.rnumel = _prod(self.rsizes)
        self.is_reduction = group.has_reduction
        # reads contiguous along x (channels-last statistics, column sums): a looped block of
        # many rows and a short R step, whatever the length of R
        self.outer = self.is_reduction and not self.symbolic and reads_along_x(group, self.xsizes)
        self.persistent = (
            self.is_reduction
            and not self.outer
            and is_static(self.rnumel)
            and int(self.rnumel) <= PERSISTENT_MAX_RNUMEL
        )
        # the x dims in the order the flat index is decomposed (outermost first): logical
        # order, or the memory order of what a pointwise kernel stores (channels-last)
        self.order = list(range(len(self.xsizes))) if self.is_reduction else self._memory_order()
        self.oxvars = [group.xvars[k] for k in self.order]
        self.oxsizes = [self.xsizes[k] for k in self.order]
        # pointwise groups whose accesses run contiguously along different dims (transposes)
        # get 2-D tiles: outer dims [:split] on axis 0, inner dims [split:] on axis 1
        self.split = None if self.is_reduction else self._tile_split()
        self.tiled = self.split is not None
        self.two_d = self.is_reduction or self.tiled
        if self.tiled:
            self.kind = "pointwise_2d"
            self.xnumel = _prod(self.oxsizes[: self.split])
            self.rnumel = _prod(self.oxsizes[self.split :])
        elif not self.is_reduction:
            self.kind = "pointwise"
        else:
            self.kind = (
                "persistent_reduction"
                if self.persistent
                else "outer_reduction"
                if self.outer
                else "reduction"
            )
        # a column sum's first stage in this row kernel ("xsum"): each program holds exactly
        # ``row_block`` rows and stores their column sums as one row of partials
        blocks = {n.row_block for n in group.nodes if group.placements.get(n.name) == "xsum"}
        if len(blocks) > 1 or (blocks and not self.persistent):
            raise AssertionError(
                f"row-block partials need one block and a persistent row: {blocks}"
            )
        self.row_block = blocks.pop() if blocks else None
        self.params: dict[str, str] = {}
        self.param_out: dict[str, bool] = {}
        self.uses_err = False
        self.n = 0
        self.top = Block()
        self.block = self.top
        self.loop_pre: list[str] | None = None  # accumulator inits of the open loop
        self.writer = {n.name: n for n in group.nodes}
        self.values: dict[str, tuple[TVar, Block]] = {}
        self.sym_dims: dict[str, frozenset] = {}
        for k, v in enumerate(self.oxvars):
            inner = self.tiled and k >= self.split
            self.sym_dims[v.name] = frozenset("r" if inner else "x")
        for v in group.rvars:
            self.sym_dims[v.name] = frozenset("r")
        self.ops = TritonOverrides(self)
        self.ctx_dims = frozenset("x")  # dims of the member being generated
        # 32-bit index math unless some index can pass 2**31 - 1 (decided while loads and
        # stores are generated; the prologue is written last)
        self.index64 = self.symbolic or self.xnumel * max(self.rnumel, 1) > INT32_MAX
        self.sym_bound: dict[str, int] = {}
        for v, size in zip(group.xvars, self.xsizes):
            self.sym_bound[v.name] = int(size) - 1 if is_static(size) else None
        for v, size in zip(group.rvars, self.rsizes):
            self.sym_bound[v.name] = int(size) - 1 if is_static(size) else None

    def _memory_order(self) -> list[int]:
        if self.symbolic:
            return list(range(len(self.xsizes)))
        return memory_order(self.g, self.xsizes, self.local_buffers)

    def _tile_split(self) -> int | None:
        g = self.g
        if len(self.xsizes) < 2 or self.symbolic:
            return None
        exprs = []
        for n in g.nodes:
            for _, e, indirect in g.reads_in_kernel(n):
                if indirect:
                    return None
                exprs.append(e)
            exprs.append(g.write_in_kernel(n))
        contiguous = set()
        for e in exprs:
            e = sympy.expand(e)
            moving = [v for k, v in enumerate(self.oxvars) if self.oxsizes[k] > 1 and e.has(v)]
            if len(moving) < 2:
                continue  # a broadcast read: contiguous along whatever it spans
            for k, v in enumerate(self.oxvars):
                if self.oxsizes[k] > 1 and sympy.diff(e, v) == 1:
                    contiguous.add(k)
        if len(contiguous) < 2:
            return None
        split = max(contiguous)
        outer, inner = _prod(self.oxsizes[:split]), _prod(self.oxsizes[split:])
        if outer < TILE_MIN or inner < TILE_MIN:
            return None
        return split

    def _bound(self, e) -> int | None:
        """An upper bound of |e| over the kernel's index space (None when unknown)."""
        e = sympy.sympify(e)
        if e.is_Integer:
            return abs(int(e))
        if e.is_Symbol:
            return self.sym_bound.get(e.name)
        if isinstance(e, (sympy.Add, sympy.Max, sympy.Min)) or isinstance(e, sympy.Mul):
            parts = [self._bound(a) for a in e.args]
            if any(p is None for p in parts):
                return None
            if isinstance(e, sympy.Mul):
                out = 1
                for p in parts:
                    out *= p
                return out
            return sum(parts) if isinstance(e, sympy.Add) else max(parts)
        if isinstance(e, FloorDiv):
            a = self._bound(e.args[0])
            return None if a is None else a // max(1, int(e.args[1]) if e.args[1].is_Integer else 1)
        if isinstance(e, IMod):
            return self._bound(e.args[1])
        if isinstance(e, Clamp):
            return self._bound(e.args[2])
        return None

    def _check_index(self, index):
        b = self._bound(index)
        if b is None or b > INT32_MAX:
            self.index64 = True

    # ------------------------------------------------------------------ emitting
    def emit(self, expr: str, dtype, dims) -> TVar:
        hit = self.block.lookup(expr)
        if hit is not None and hit.dtype == dtype:
            return hit
        name = f"tmp{self.n}"
        self.n += 1
        var = TVar(name, dtype, frozenset(dims))
        target = self.block
        if target.parent is not None and "r" not in var.dims:
            target = target.parent  # loop-invariant: computed once, before the loop
        target.lines.append(f"{name} = {expr}")
        target.cache[expr] = var
        return var

    def line(self, text):
        self.block.lines.append(text)

    def new_name(self, prefix):
        name = f"{prefix}{self.n}"
        self.n += 1
        return name

    def dims_of(self, expr) -> frozenset:
        out = set()
        for s in sympy.sympify(expr).free_symbols:
            out |= self.sym_dims.get(s.name, frozenset())
        return frozenset(out)

    def shape(self, dims) -> str:
        if not self.two_d:
            return "[XBLOCK]"
        return {
            frozenset(): "[1, 1]",
            frozenset("x"): "[XBLOCK, 1]",
            frozenset("r"): "[1, RBLOCK]",
            frozenset("xr"): "[XBLOCK, RBLOCK]",
        }[frozenset(dims)]

    def mask(self, dims) -> str | None:
        dims = frozenset(dims)
        if not dims:
            return None
        if dims == frozenset("x"):
            return "xmask"
        if dims == frozenset("r"):
            return "rmask"
        return "xrmask"

    def ptr(self, name, out=False):
        if name not in self.params:
            self.params[name] = f"{'out' if out else 'in'}_ptr{len(self.params)}"
        if out:
            self.param_out[name] = True
        else:
            self.param_out.setdefault(name, False)
        return self.params[name]

    # ------------------------------------------------------------------ memory
    def load(self, name, index) -> TVar:
        if name in self.writer:
            return self._value_of(name)
        dtype = self.buffer_dtype[name]
        index = sympy.expand(index)
        if self.row_block or (index.has(IMod) and index.has(FloorDiv)):
            # div/mod pairs that fold back: a row of a row block reached through its chunk
            # (x // block) and its place in it (x % block); a split reduction's chunk of a
            # channels-last image reached through (h, w) (``x1 + 256*(r0 % 56) + 14336*((14*x0
            # + r0 // 56) % 56) + ...`` is ``x1 + 256*r0 + 200704*x0``: no divisions a value)
            index = simplify_index(index)
        self._check_index(index)
        index, inside = self._unclamped(index)
        dims = self.dims_of(index)
        ptr = f"{self.ptr(name)} + {texpr(index)}"
        if not dims:
            # one element for every lane: a block, not a scalar (scalars and blocks mix
            # unevenly in bitwise ops, notably in the interpreter)
            dims = frozenset("x")
            ptr += f" + tl.zeros({self.shape(dims)}, tl.int32)"
        mask = self.mask(dims)
        if inside:
            mask = " & ".join(([mask] if mask else []) + inside)
        expr = f"tl.load({ptr}, {mask}, other=0)"
        if compute_dtype(dtype) != dtype:
            expr += ".to(tl.float32)"
        return self.emit(expr, dtype, dims)

    def _unclamped(self, index):
        """``index`` without its selected clamps, and the range tests that mask the load in
        their place: a cat's or a pad's lane then reads only the input it selects, and
        out-of-range lanes read no memory (their value, 0, is discarded by the select)."""
        clamps = index.atoms(SelectedClamp)
        if not clamps:
            return index, []
        tests = []
        for c in sorted(clamps, key=sympy.default_sort_key):
            a, lo, hi = c.args
            if a.atoms(Clamp):
                return index, []  # nested clamps: keep them all
            e = texpr(a)
            if not (lo == 0 and a.is_nonnegative):
                tests.append(f"({e} >= {texpr(lo)})")
            tests.append(f"({e} <= {texpr(hi)})")
        index = sympy.expand(index.xreplace({c: c.args[0] for c in clamps}))
        return index, tests

    def _value_of(self, name) -> TVar:
        got = self.values.get(name)
        if got is not None and self.block.sees(got[1]):
            return got[0]
        node = self.writer[name]
        if node.is_reduction:
            raise AssertionError(f"{name}: reduction result read before it is computed")
        # recompute (a value from an earlier loop of a looped reduction)
        saved = self.ctx_dims
        value, _ = self._compute(node, store=False)
        self.ctx_dims = saved
        return self.values[name][0] if name in self.values else value

    def store(self, name, index, value: TVar, store_to_memory=True):
        dtype = self.buffer_dtype[name]
        held = value
        if value.dtype != dtype:
            held = self.ops.to_dtype(value, dtype)
        elif dtype in (torch.float16, torch.bfloat16):
            held = self.emit(f"{value}.to({TL_DTYPE[dtype]}).to(tl.float32)", dtype, value.dims)
        self.values[name] = (held, self.block)
        if not store_to_memory or name in self.local_buffers:
            return
        index = sympy.expand(index)
        self._check_index(index)
        dims = self.dims_of(index)
        offset = texpr(index)
        ctx = self.ctx_dims
        if dims != ctx:
            offset = f"{offset} + tl.zeros({self.shape(ctx)}, tl.int32)"
        v = held.name
        if dtype == torch.bool and held.dtype != torch.bool:
            v = f"({v} != 0)"
        elif compute_dtype(dtype) != dtype or held.dtype != dtype:
            v = f"{v}.to({TL_DTYPE[dtype]})"
        self.line(f"tl.store({self.ptr(name, out=True)} + {offset}, {v}, {self.mask(ctx)})")

    def indirect(self, v: TVar, size, checked=True) -> sympy.Symbol:
        """A gather index: wrapped like eager (negative counts from the end), checked, and
        clamped so no lane reads out of bounds; a bad index sets the error flag the wrapper
        turns into IndexError. ``checked=False``: known in range (a constant table), used as
        it is."""
        s = texpr(size)
        dims = v.dims
        i = self.emit(f"{v}.to(tl.int64)", torch.int64, dims)
        if checked:
            self.uses_err = True
            i = self.emit(f"tl.where({i} < 0, {i} + {s}, {i})", torch.int64, dims)
            bad = self.emit(f"({i} < 0) | ({i} >= {s})", torch.bool, dims)
            m = self.mask(dims)
            badm = f"{bad} & {m}" if m else bad
            # one flag store per check: the same index gathered again reuses ``bad`` and
            # would store the same flag again (up to 4 times in ResNet-50's stem gradient)
            key = f"err-store {badm}"
            if self.block.lookup(key) is None:
                offs = f"tl.zeros({self.shape(dims)}, tl.int32)" if dims else "0"
                self.line(
                    f"tl.store(err_ptr + {offs}, 1, {badm})"
                    if dims
                    else f"tl.store(err_ptr, 1, {badm})"
                )
                self.block.cache[key] = bad
            i = self.emit(f"tl.where({bad}, 0, {i})", torch.int64, dims)
        sym = sympy.Symbol(i.name, integer=True, nonnegative=True)
        self.sym_dims[i.name] = dims
        b = self._bound(size)
        self.sym_bound[i.name] = None if b is None else b - 1
        return sym

    # ------------------------------------------------------------------ node bodies
    def _compute(self, node, store=True):
        idx, ridx = self.g.index_of(node)
        placement = self.g.placements[node.name]
        self.ctx_dims = frozenset("x") if placement in ("x", "reduction") else frozenset("xr")
        if not self.is_reduction:
            self.ctx_dims = frozenset("xr") if self.tiled else frozenset("x")
        with V.set_handler(self.ops):
            value = node.run_body(idx, ridx)
        if not node.is_reduction:
            self.store(node.name, node.write_index(idx), value, store_to_memory=store)
        return value, (idx, ridx)

    # ------------------------------------------------------------------ structure
    def codegen(self) -> str:
        g = self.g
        if self.persistent:
            self.line("rindex = tl.arange(0, RBLOCK)[None, :]@@R64@@")
            self.line(self._rmask())
            self.line("xrmask = xmask & rmask")
            self.lines_decompose("rindex", self.g.rvars, self.rsizes)
            if self.row_block:
                self.line("xchunk = tl.program_id(0)@@R64@@")  # XBLOCK == row_block
                self.sym_dims["xchunk"] = frozenset()
                chunks = -(-int(self.xnumel) // self.row_block)
                self.sym_bound["xchunk"] = chunks - 1
        for kind, members in g.phases:
            if kind == "x":
                for n in members:
                    self._compute(n)
            elif self.persistent:
                self._reduction_phase(members)
            else:
                self._looped_phase(members)
        return self._assemble()

    def _prologue(self) -> list[str]:
        saved, self.block = self.block, Block()
        pid = "tl.program_id(0).to(tl.int64)" if self.index64 else "tl.program_id(0)"
        self.line(f"xoffset = {pid} * XBLOCK")
        if self.two_d:
            self.line("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
        else:
            self.line("xindex = xoffset + tl.arange(0, XBLOCK)")
        self.line(f"xmask = xindex < {self._numel('xnumel', self.xnumel)}")
        if self.tiled:
            k = self.split
            self.lines_decompose("xindex", self.oxvars[:k], self.oxsizes[:k])
            pid1 = "tl.program_id(1).to(tl.int64)" if self.index64 else "tl.program_id(1)"
            self.line(f"roffset = {pid1} * RBLOCK")
            self.line("rindex = roffset + tl.arange(0, RBLOCK)[None, :]")
            self.line(self._rmask())
            self.line("xrmask = xmask & rmask")
            self.lines_decompose("rindex", self.oxvars[k:], self.oxsizes[k:])
        else:
            self.lines_decompose("xindex", self.oxvars, self.oxsizes)
        lines, self.block = self.block.lines, saved
        return lines

    @staticmethod
    def _numel(arg, n) -> str:
        """A mask's bound: the size itself where static (Triton then knows what divides it,
        so a mask over 1000 is constant over 8 lanes and loads under it vectorize; the
        argument is specialized only when 16 divides it), else the argument."""
        return str(int(n)) if is_static(n) else arg

    def _rmask(self) -> str:
        return f"rmask = rindex < {self._numel('rnumel', self.rnumel)}"

    def lines_decompose(self, flat, variables, sizes):
        stride = sympy.Integer(1)
        parts = []
        for v, s in reversed(list(zip(variables, sizes))):
            parts.append((v, s, stride))
            stride *= s
        for k, (v, s, st) in enumerate(reversed(parts)):
            e = flat if st == 1 else f"({flat} // {texpr(st)})"
            if k > 0:
                e = f"({e} % {texpr(s)})"
            self.line(f"{v.name} = {e}")

    def _reduction_phase(self, members):
        accs: dict[tuple, tuple] = {}
        for n in members:
            value, (idx, ridx) = self._compute(n)
            if not n.is_reduction:
                continue
            if self.g.placements[n.name] == "xsum":
                self._sum_row_block(n, value, idx)
                continue
            rtype = n.node.data.reduction_type
            result = self._reduce_persistent(n, rtype, value, ridx, accs)
            self.ctx_dims = frozenset("x")
            self.store(n.name, n.write_index(idx), result)

    def _sum_row_block(self, n, value: TVar, idx):
        """Store this program's block of rows summed down the columns: one row of the column
        sum's partials, at chunk = program id (the block is XBLOCK rows)."""
        dt = self._acc_dtype("sum", value)
        masked = self.emit(f"tl.where(xrmask, {self._cast(value, dt)}, 0.0)", dt, "xr")
        rd = frozenset("r")
        part = self.emit(f"tl.sum({masked}, 0)[None, :]", dt, rd)
        chunk = sympy.Symbol("xchunk", integer=True, nonnegative=True)
        idx = [chunk, *idx[1:]]
        self.ctx_dims = rd
        self.store(n.name, n.write_index(idx), TVar(part.name, self._result_dtype(n, "sum"), rd))

    def _looped_phase(self, members):
        outer = self.block
        loop = Block(outer)
        self.block = loop
        pre: list[str] = []
        post: list[tuple] = []
        accs: dict[tuple, tuple] = {}
        self.line("rindex = roffset + tl.arange(0, RBLOCK)[None, :]@@R64@@")
        self.line(self._rmask())
        self.line("xrmask = xmask & rmask")
        self.lines_decompose("rindex", self.g.rvars, self.rsizes)
        for n in members:
            value, (idx, ridx) = self._compute(n)
            if n.is_reduction:
                rtype = n.node.data.reduction_type
                finish = self._reduce_looped(n, rtype, value, ridx, accs, pre)
                post.append((n, idx, finish))
        self.block = outer
        outer.lines += pre
        # a literal trip count: sizes are static, and some interpreters cannot take a
        # scalar argument as a range bound
        trips = self._numel("rnumel", self.rnumel)
        if self.kind == "reduction" and is_static(self.rnumel) and int(self.rnumel) % 16:
            # whole blocks first, without the ragged-edge mask, then the last partial block:
            # a mask `rindex < 50257` (a vocabulary) is constant over no two neighbouring
            # lanes, which keeps Triton from vectorizing the row's loads (a length that 16
            # divides is specialized by Triton's JIT: its mask is constant over 16 lanes)
            whole = f"({trips} // RBLOCK) * RBLOCK"
            unmasked = [_UNMASKED if ln == self._rmask() else ln for ln in loop.lines]
            outer.lines.append(f"for roffset in range(0, {whole}, RBLOCK):")
            outer.lines += ["    " + ln for ln in unmasked]
            outer.lines.append(f"for roffset in range({whole}, {trips}, RBLOCK):")
        else:
            outer.lines.append(f"for roffset in range(0, {trips}, RBLOCK):")
        outer.lines += ["    " + ln for ln in loop.lines]
        for n, idx, finish in post:
            result = finish()
            self.ctx_dims = frozenset("x")
            self.store(n.name, n.write_index(idx), result)

    # ------------------------------------------------------------------ reductions
    def _flat_rindex(self, n, ridx):
        flat = sympy.Integer(0)
        for r, s in zip(ridx, n.rranges):
            flat = flat * s + r
        return texpr(sympy.expand(flat))

    def _acc_dtype(self, rtype, v: TVar):
        if rtype.startswith("welford"):
            return torch.float64 if v.dtype == torch.float64 else torch.float32
        if v.dtype == torch.bool and rtype in ("sum", "prod", "max", "min", "argmax", "argmin"):
            return torch.int8
        return compute_dtype(v.dtype)

    def _init(self, rtype, dt):
        if rtype in ("sum", "any"):
            return 0
        if rtype in ("prod", "all"):
            return 1
        if rtype in ("max", "argmax"):
            return float("-inf") if dt.is_floating_point else torch.iinfo(dt).min
        if rtype in ("min", "argmin"):
            return float("inf") if dt.is_floating_point else torch.iinfo(dt).max
        raise NotImplementedError(rtype)

    def _result_dtype(self, n, rtype):
        src = n.node.data.src_dtype
        if rtype in ("argmax", "argmin"):
            return torch.int64
        if rtype in ("any", "all"):
            return torch.bool
        return src

    def _cast(self, v: TVar, dt) -> str:
        if compute_dtype(v.dtype) == dt:
            return v.name
        if dt == torch.int8 and v.dtype == torch.bool:
            return f"{v}.to(tl.int8)"
        return f"{v}.to({TL_DTYPE[dt]})"

    def _reduce_persistent(self, n, rtype, v: TVar, ridx, accs) -> TVar:
        xd = frozenset("x")
        if rtype in ("any", "all"):
            vb = v.name if v.dtype == torch.bool else f"({v} != 0)"
            fill = "0" if rtype == "any" else "1"
            red = "tl.max" if rtype == "any" else "tl.min"
            e = f"{red}(tl.where(xrmask, {vb}.to(tl.int8), {fill}), 1)[:, None] != 0"
            return self.emit(e, torch.bool, xd)
        if rtype.startswith("welford"):
            key = ("welford", v.name)
            if key not in accs:
                dt = self._acc_dtype(rtype, v)
                tdt = TL_DTYPE[dt]
                vv = self.emit(f"{self._cast(v, dt)} + tl.zeros([XBLOCK, RBLOCK], {tdt})", dt, "xr")
                s = self.emit(f"tl.sum(tl.where(xrmask, {vv}, 0.0), 1)[:, None]", dt, xd)
                mean = self.emit(f"{s} / {self.rnumel}", dt, xd)
                d = self.emit(f"tl.where(xrmask, {vv} - {mean}, 0.0)", dt, "xr")
                m2 = self.emit(f"tl.sum({d} * {d}, 1)[:, None]", dt, xd)
                accs[key] = (mean, m2)
            mean, m2 = accs[key]
            out = mean if rtype == "welford_mean" else m2
            return TVar(out.name, self._result_dtype(n, rtype), xd)
        if rtype.startswith("softmax"):
            key = ("softmax", v.name)
            if key not in accs:
                dt = self._acc_dtype(rtype, v)
                x = self.emit(f"tl.where(xrmask, {self._cast(v, dt)}, float('-inf'))", dt, "xr")
                m = self.emit(self._max_min("max", x, dt), dt, xd)
                shift = self.emit(_finite_shift(m), dt, xd)
                s = self.emit(f"tl.sum(tl.exp({x} - {shift}), 1)[:, None]", dt, xd)
                accs[key] = (m, s)
            m, s = accs[key]
            out = m if rtype == "softmax_max" else s
            return TVar(out.name, self._result_dtype(n, rtype), xd)
        dt = self._acc_dtype(rtype, v)
        init = constant(self._init(rtype, dt), dt)
        masked = self.emit(f"tl.where(xrmask, {self._cast(v, dt)}, {init})", dt, "xr")
        rdt = self._result_dtype(n, rtype)
        if rtype in ("argmax", "argmin"):
            flat = self._flat_rindex(n, ridx)
            ii = self.emit(
                f"tl.where(xrmask, {flat} + tl.zeros([XBLOCK, RBLOCK], tl.int64), {BIG_INDEX})",
                torch.int64,
                "xr",
            )
            vname, iname = self.new_name("rv"), self.new_name("ri")
            self.line(f"{vname}, {iname} = tl.reduce(({masked}, {ii}), 1, dm.{rtype}_combine)")
            return self.emit(f"{iname}[:, None]", torch.int64, xd)
        if rtype == "sum":
            e = f"tl.sum({masked}, 1)[:, None]"
        elif rtype == "prod":
            e = f"tl.reduce({masked}, 1, dm.prod_combine)[:, None]"
        elif rtype in ("max", "min"):
            e = self._max_min(rtype, masked, dt)
        else:
            raise NotImplementedError(f"reduction {rtype} in the Triton backend")
        r = self.emit(e, dt, xd)
        if dt != compute_dtype(rdt):
            r = self.emit(
                f"{r}.to({tl_compute(rdt)})" if rdt != torch.bool else f"{r} != 0", rdt, xd
            )
        return TVar(r.name, rdt, xd)

    def _max_min(self, rtype, masked, dt) -> str:
        """Row max/min with eager's NaN rule: a NaN anywhere in the row wins (a native
        reduction plus a NaN flag, whatever the target's max does with NaN)."""
        red = f"tl.{rtype}({masked}, 1)[:, None]"
        if not dt.is_floating_point:
            return red
        flag = f"tl.max(({masked} != {masked}).to(tl.int8), 1)[:, None]"
        return f'tl.where({flag} > 0, float("nan"), {red})'

    def _reduce_looped(self, n, rtype, v: TVar, ridx, accs, pre):
        """Per-lane accumulators updated in the loop; returns a function that emits the final
        cross-lane combine after the loop."""
        xd = frozenset("x")
        rdt = self._result_dtype(n, rtype)
        full = "[XBLOCK, RBLOCK]"
        if rtype.startswith("welford"):
            key = ("welford", v.name)
            if key not in accs:
                dt = self._acc_dtype(rtype, v)
                tdt = TL_DTYPE[dt]
                m, q, w = (self.new_name(p) for p in ("wmean", "wm2", "wn"))
                for a in (m, q, w):
                    pre.append(f"{a} = tl.zeros({full}, {tdt})")
                x = self._cast(v, dt)
                self.line(f"{w}_next = tl.where(xrmask, {w} + 1.0, {w})")
                self.line(f"{m}_delta = {x} - {m}")
                self.line(
                    f"{m}_next = tl.where(xrmask, {m} + {m}_delta / tl.where({w}_next == 0.0, "
                    f"1.0, {w}_next), {m})"
                )
                self.line(f"{q} = tl.where(xrmask, {q} + {m}_delta * ({x} - {m}_next), {q})")
                self.line(f"{m} = {m}_next")
                self.line(f"{w} = {w}_next")
                accs[key] = (m, q, w, dt, [])
            m, q, w, dt, done = accs[key]

            def finish():
                if not done:
                    a, b, c = (self.new_name(p) for p in ("mean", "m2", "n"))
                    self.line(f"{a}, {b}, {c} = tl.reduce(({m}, {q}, {w}), 1, dm.welford_combine)")
                    done.append((a, b))
                a, b = done[0]
                out = a if rtype == "welford_mean" else b
                return self.emit(f"{out}[:, None]", rdt, xd)

            return finish
        if rtype.startswith("softmax"):
            return self._softmax_looped(n, rtype, v, accs, pre)
        dt = self._acc_dtype(rtype, v)
        tdt = TL_DTYPE[dt]
        acc = self.new_name("acc")
        if rtype in ("any", "all"):
            vb = v.name if v.dtype == torch.bool else f"({v} != 0)"
            init = 0 if rtype == "any" else 1
            pre.append(f"{acc} = tl.full({full}, {init}, tl.int8)")
            op = "|" if rtype == "any" else "&"
            self.line(f"{acc} = tl.where(xrmask, {acc} {op} {vb}.to(tl.int8), {acc})")
            red = "tl.max" if rtype == "any" else "tl.min"
            return lambda: self.emit(f"{red}({acc}, 1)[:, None] != 0", torch.bool, xd)
        init = literal(self._init(rtype, dt), dt)
        pre.append(f"{acc} = tl.full({full}, {init}, {tdt})")
        x = self._cast(v, dt)
        if rtype in ("argmax", "argmin"):
            pre.append(f"{acc}_i = tl.full({full}, {BIG_INDEX}, tl.int64)")
            flat = self._flat_rindex(n, ridx)
            self.line(
                f"{acc}_nv, {acc}_ni = dm.{rtype}_combine({acc}, {acc}_i, {x}, "
                f"{flat} + tl.zeros({full}, tl.int64))"
            )
            self.line(f"{acc} = tl.where(xrmask, {acc}_nv, {acc})")
            self.line(f"{acc}_i = tl.where(xrmask, {acc}_ni, {acc}_i)")

            def finish_arg():
                a, b = self.new_name("rv"), self.new_name("ri")
                self.line(f"{a}, {b} = tl.reduce(({acc}, {acc}_i), 1, dm.{rtype}_combine)")
                return self.emit(f"{b}[:, None]", torch.int64, xd)

            return finish_arg
        update = {
            "sum": f"{acc} + {x}",
            "prod": f"{acc} * {x}",
            "max": f"dm.maximum({acc}, {x})",
            "min": f"dm.minimum({acc}, {x})",
        }.get(rtype)
        if update is None:
            raise NotImplementedError(f"reduction {rtype} in the Triton backend")
        self.line(f"{acc} = tl.where(xrmask, {update}, {acc})")
        final = {
            "sum": f"tl.sum({acc}, 1)",
            "prod": f"tl.reduce({acc}, 1, dm.prod_combine)",
        }.get(rtype)

        def finish():
            if final is None:
                r = self.emit(self._max_min(rtype, acc, dt), dt, xd)
            else:
                r = self.emit(f"{final}[:, None]", dt, xd)
            if dt != compute_dtype(rdt):
                e = f"{r} != 0" if rdt == torch.bool else f"{r}.to({tl_compute(rdt)})"
                r = self.emit(e, rdt, xd)
            return TVar(r.name, rdt, xd)

        return finish

    def _softmax_looped(self, n, rtype, v: TVar, accs, pre):
        """A running max per row and a sum of exp(value - that max) per lane: each block's
        max is taken across the block first, so a value costs one exp, and the lanes' sums
        are rescaled by one exp(old max - new max) a row when the max grows (a running max
        per lane needed a second exp per value: 2 exps an element made a vocabulary's
        log-softmax compute-bound). A row that saw only -inf shifts by 0, so its sums stay 0
        (not NaN); a NaN or +inf makes the sums NaN, as eager's softmax is."""
        key = ("softmax", v.name)
        if key not in accs:
            dt = self._acc_dtype(rtype, v)
            tdt = TL_DTYPE[dt]
            m, s = self.new_name("smax"), self.new_name("ssum")
            pre.append(f"{m} = tl.full([XBLOCK, 1], float('-inf'), {tdt})")
            pre.append(f"{s} = tl.zeros([XBLOCK, RBLOCK], {tdt})")
            x = self._cast(v, dt)
            self.line(f"{m}_tile = tl.where(xrmask, {x}, float('-inf'))")
            self.line(f"{m}_next = dm.maximum({m}, tl.max({m}_tile, 1)[:, None])")
            self.line(f"{m}_shift = {_finite_shift(f'{m}_next')}")
            self.line(f"{s} = {s} * tl.exp({m} - {m}_shift) + tl.exp({m}_tile - {m}_shift)")
            self.line(f"{m} = {m}_next")
            accs[key] = (m, s, dt, [])
        m, s, dt, done = accs[key]
        rdt = self._result_dtype(n, rtype)

        def finish():
            if not done:
                b = self.new_name("rsum")
                self.line(f"{b} = tl.sum({s}, 1)[:, None]")
                done.append((m, b))
            a, b = done[0]
            out = a if rtype == "softmax_max" else b
            return self.emit(out, rdt, frozenset("x"))

        return finish

    # ------------------------------------------------------------------ assembly
    def signature(self) -> dict[str, str]:
        sig = {}
        for name, p in self.params.items():
            sig[p] = SIGNATURE_TYPE[self.buffer_dtype[name]]
        if self.uses_err:
            sig["err_ptr"] = "*i64"
        for name in self.size_args:
            sig[name] = "i64"
        sig["xnumel"] = "i64" if self.index64 else "i32"
        if self.two_d:
            sig["rnumel"] = "i64" if self.index64 else "i32"
        sig["XBLOCK"] = "constexpr"
        if self.two_d:
            sig["RBLOCK"] = "constexpr"
        return sig

    def _assemble(self) -> str:
        r64 = ".to(tl.int64)" if self.index64 else ""
        lines = self._prologue() + [ln.replace("@@R64@@", r64) for ln in self.top.lines]
        found = set(_SIZE_SYMBOL.findall("\n".join(lines)))
        if self.symbolic:
            for e in (self.xnumel, self.rnumel):
                found |= {str(s) for s in e.free_symbols}
        self.size_args = sorted(found, key=lambda n: int(n[1:]))
        sig = self.signature()
        args = [a if t != "constexpr" else f"{a}: tl.constexpr" for a, t in sig.items()]
        jit = "@triton.jit"
        if self.symbolic:
            # one binary for every size: no specialisation on divisibility or == 1
            loose = [*self.size_args, "xnumel"] + (["rnumel"] if self.two_d else [])
            jit = f"@triton.jit(do_not_specialize={loose!r})"
        head = [jit, f"def {self.kernel_name}({', '.join(args)}):"]
        body = ["    " + ln for ln in lines]
        from danlu_inductor.codegen.pyexpr import pexpr

        meta = {
            "kind": self.kind,
            "xnumel": hint(self.xnumel),
            "rnumel": hint(self.rnumel),
            "params": list(self.params),
            "uses_err": self.uses_err,
            "signature": sig,
            # symbolic kernels: the size arguments (after the pointers) and the launch sizes
            # as Python expressions of them
            "size_args": list(self.size_args),
            "size_hints": [hint_of_name(n) for n in self.size_args],
            "numel_exprs": [pexpr(self.xnumel), pexpr(self.rnumel)] if self.symbolic else None,
        }
        if self.row_block:
            meta["xblock"] = self.row_block
        tail = [f"{self.kernel_name}.danlu_meta = {meta!r}", ""]
        return "\n".join(head + body + ["", ""] + tail)


def _prod(sizes):
    out = sympy.Integer(1)
    for s in sizes:
        out *= s
    return out
