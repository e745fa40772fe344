"""One fused group -> one C++ function.

Layout of a kernel over outer space X and reduction space R:

    #pragma omp parallel for collapse(..)     <- outer loops over X (threads)
    for x...:
        [x phase]   members placed "x": one value per outer index
        [r phase]   accumulators; for r...: members placed "xr"/"reduction"; finish
        ...         (phases in dependency order)

Pointwise-only kernels have no R: the innermost X loop is the `omp simd` loop. When X is too
small to feed the threads, reductions split R across threads instead, each thread keeping a
partial accumulator that is combined in thread order afterwards (deterministic).
"""

from __future__ import annotations

import os
import re

import sympy
import torch

from danlu_inductor.codegen.cpp import vertical
from danlu_inductor.codegen.cpp.loops import loop_nest as _loop_nest
from danlu_inductor.codegen.cpp.overrides import CppOverrides
from danlu_inductor.codegen.cpp.printer import STORAGE_CTYPE, cexpr, value_ctype
from danlu_inductor.codegen.loop_order import memory_order
from danlu_inductor.codegen.op_handler import CSEVar
from danlu_inductor.ir.ops import V
from danlu_inductor.ir.symbols import (
    Clamp,
    FloorDiv,
    as_exprs,
    hint,
    index_vars,
    is_static,
    product,
    simplify_index,
    sym,
)

PARALLEL_THRESHOLD = 16384  # elements of work below which threads cost more than they give
SPLIT_MAX_X = 8  # reductions with fewer outer iterations split R across threads
SPLIT_MIN_R = 32768
MAX_THREADS = 256
WIDE_ACC_MIN_R = 4096
# a pointwise kernel computes a value that depends only on its innermost index (a batch norm's
# 1/sqrt(var + eps) per channel) once per index, into a table, when the inner loop is this
# short and the outer loops repeat it at least TABLE_MIN_OUTER times
TABLE_MAX_INNER = 4096
TABLE_MIN_OUTER = 4
# a pointwise kernel whose loads clamp the inner index (cat, constant padding) runs one inner
# loop per piece of the index where every clamp is either the identity or a constant
PIECES_MIN_INNER = 16
PIECES_MAX = 9


class Scope:
    def __init__(self, parent=None):
        self.lines: list[str] = []
        self.cache = dict(parent.cache) if parent is not None else {}
        self.parent = parent


_NAME = re.compile(r"\b(tmp\d+|idx\d+|r\d+|x\d+)\b")
# symbols of symbolic sizes (the ShapeEnv's s0, s1, ...): int64_t parameters of the kernel
_SIZE_SYMBOL = re.compile(r"\bs\d+\b")


class CppKernel:
    def __init__(self, group, kernel_name: str, buffer_dtype, local_buffers: set[str], outputs):
        self.g = group
        self.kernel_name = kernel_name
        self.buffer_dtype = buffer_dtype  # name -> dtype
        self.local_buffers = local_buffers
        self.params: dict[str, str] = {}  # buffer name -> pointer name
        self.param_out: dict[str, bool] = {}
        self.outputs = outputs  # names this kernel stores to memory
        self.scope = Scope()
        self.locals: dict[str, CSEVar] = {}
        self.n = 0
        self.uses_indirect = False
        self.size_args: list[str] = []  # symbolic sizes the kernel reads, after the pointers
        self.inner_vars: set[str] = set()
        self.inner_x = None  # innermost loop variable of a pointwise kernel (for hoisting)
        self.inner_range = None  # (first, end) of the inner loop's piece being generated
        # per temporary: its C type and expression, and the loop variables it depends on
        # ("?" for what cannot be recomputed elsewhere: indirect indices)
        self.defs: dict[str, tuple[str, str]] = {}
        self.deps: dict[str, frozenset] = {}
        self.table_size = None  # the inner loop's length where tables are on (see codegen)
        self.tables: list[str] = []  # temporaries read from a table in the inner loop
        self.overrides = CppOverrides(self)
        self._plan_loops()
        # kernel-local buffers written in one reduction-space loop and read in a later one
        # live in a per-thread row of scratch memory instead of a full buffer
        self.scratch = set()
        phase_of = {n.name: p for p, (_, ms) in enumerate(group.phases) for n in ms}
        for n in group.nodes:
            if n.name in local_buffers and group.placements[n.name] == "xr":
                if any(phase_of.get(u) != phase_of[n.name] for u in n.users):
                    self.scratch.add(n.name)

    # ---------------------------------------------------------------- loop variables
    def _plan_loops(self):
        g = self.g
        exprs = []
        for n in g.nodes:
            exprs += [simplify_index(e) for _, e, _ in g.reads_in_kernel(n)]
            exprs.append(simplify_index(g.write_in_kernel(n)))
        self.accesses = exprs  # every load and store index, simplified (before merging dims)
        xsizes, xvars = as_exprs(g.xsizes), list(g.xvars)
        if not g.has_reduction:
            # walk the dims in the stored buffer's memory order (channels-last outputs)
            order = memory_order(g, xsizes, self.local_buffers)
            xsizes, xvars = [xsizes[k] for k in order], [xvars[k] for k in order]
        self.xsizes, xsub = _merge_dims(xsizes, xvars, exprs, "x")
        self.rsizes, rsub = _merge_dims(as_exprs(g.rsizes), g.rvars, exprs, "r")
        self.sub = {**xsub, **rsub}
        self.xvars = index_vars("x", len(self.xsizes)) if self.sub else g.xvars
        self.rvars = index_vars("r", len(self.rsizes)) if self.sub else g.rvars
        if xsub == {} and len(self.xsizes) == len(g.xvars):
            self.xvars = xvars
        if rsub == {} and len(self.rsizes) == len(g.rvars):
            self.rvars = g.rvars

    def _final(self, exprs):
        return [sympy.expand(sympy.sympify(e).xreplace(self.sub)) if self.sub else e for e in exprs]

    def _inner_clamps(self, index):
        """``(clamp, offset)`` for each clamp of ``inner index + offset`` in ``index``."""
        out = []
        for c in sympy.sympify(index).atoms(Clamp):
            a, lo, hi = c.args
            offset = sympy.expand(a - self.xvars[-1])
            if offset.is_Integer and lo.is_Integer and hi.is_Integer:
                out.append((c, int(offset)))
        return out

    def _inner_pieces(self):
        """The inner loop cut where some load's clamp of the inner index starts or stops
        being the identity (a cat's inputs, a padded row's edges): in each piece every such
        load reads contiguously or one fixed element, where one loop over the whole row
        loaded every input at a clamped index and selected. None when nothing is cut."""
        if os.environ.get("DANLU_CPP_PIECES") == "0" or not is_static(self.xsizes[-1]):
            return None
        n = int(self.xsizes[-1])
        if n < PIECES_MIN_INNER:
            return None
        cuts = set()
        for e in self._final(self.accesses):
            for c, offset in self._inner_clamps(e):
                _, lo, hi = c.args
                cuts.update(p for p in (int(lo) - offset, int(hi) + 1 - offset) if 0 < p < n)
        if not cuts or len(cuts) + 1 > PIECES_MAX:
            return None
        points = [0, *sorted(cuts), n]
        return list(zip(points[:-1], points[1:]))

    def _within_piece(self, index):
        """``index`` with each clamp of the inner index resolved for the current piece."""
        first, end = self.inner_range
        sub = {}
        for c, offset in self._inner_clamps(index):
            a, lo, hi = c.args
            if int(lo) <= first + offset and end - 1 + offset <= int(hi):
                sub[c] = a
            elif end - 1 + offset < int(lo):
                sub[c] = lo
            elif first + offset > int(hi):
                sub[c] = hi
        return sympy.expand(index.xreplace(sub)) if sub else index

    # --------------------------------------------------------------------------- emitting
    def emit(self, expr: str, dtype) -> CSEVar:
        hit = self.scope.cache.get(expr)
        if hit is not None and hit.dtype == dtype:
            return hit
        name = f"tmp{self.n}"
        self.n += 1
        var = CSEVar(name, dtype)
        ctype = value_ctype(dtype)
        self.defs[name] = (ctype, expr)
        self.deps[name] = deps = self._deps_of(expr)
        # Loop-invariant code motion: a value that depends on no reduction-loop variable
        # (directly or through temporaries) is computed once, before the loop.
        target = self.scope
        if target.parent is not None and not self._inner_dependent(expr):
            target = target.parent
            self.scope.cache[expr] = var
        else:
            self.inner_vars.add(name)
            if self._tabled(expr, deps):
                self.tables.append(name)
                expr = f"tab_{name}[{self.inner_x}]"
        target.lines.append(f"{ctype} {name} = {expr};")
        target.cache[self.defs[name][1]] = var
        return var

    def _deps_of(self, expr: str) -> frozenset:
        out = set()
        for m in _NAME.findall(expr):
            if m[0] in "xr":
                out.add(m)
            elif m.startswith("tmp") and m in self.deps:
                out |= self.deps[m]
            else:
                out.add("?")
        return frozenset(out)

    def _tabled(self, expr: str, deps) -> bool:
        """Arithmetic (not a bare load) on the inner index alone, in a kernel with tables."""
        return (
            self.table_size is not None
            and self.scope is self.pw_inner
            and deps == {self.inner_x}
            and any(m.startswith("tmp") for m in _NAME.findall(expr))
        )

    def _table_prelude(self) -> list[str]:
        """Before the outer loops: one pass over the inner index filling every table, with
        the temporaries the tabled ones are computed from."""
        if not self.tables:
            return []
        need: set[str] = set()

        def visit(name):
            if name in need:
                return
            need.add(name)
            for m in _NAME.findall(self.defs[name][1]):
                if m.startswith("tmp"):
                    visit(m)

        for name in self.tables:
            visit(name)
        body = []
        for name in sorted(need, key=lambda t: int(t[3:])):
            ctype, expr = self.defs[name]
            body.append(f"{ctype} {name} = {expr};")
        body += [f"tab_{t}[{self.inner_x}] = {t};" for t in self.tables]
        decls = [f"alignas(64) {self.defs[t][0]} tab_{t}[{self.table_size}];" for t in self.tables]
        return decls + _loop_nest(
            [self.inner_x], [self.table_size], body, parallel=False, simd_inner=True
        )

    def _inner_dependent(self, expr: str) -> bool:
        for m in _NAME.findall(expr):
            if m[0] == "r" or m in self.inner_vars or m == self.inner_x:
                return True
        return False

    def divides_by_row_value(self, a: CSEVar, b: CSEVar) -> bool:
        """``a / b`` inside a loop where ``b`` is a reduction result (fixed for the loop)."""
        return (
            self.g.has_reduction
            and self.scope.parent is not None
            and b.name.startswith(("v_", "res_"))
            and self._inner_dependent(a.name)
        )

    def line(self, text):
        self.scope.lines.append(text)

    def ptr(self, name, out=False):
        if name not in self.params:
            self.params[name] = f"{'out' if out else 'in'}_ptr{len(self.params)}"
        if out:
            self.param_out[name] = True
        else:
            self.param_out.setdefault(name, False)
        return self.params[name]

    def load(self, name, index):
        if name in self.scratch:
            return self.emit(f"scratch_{name}[{self._flat_r()}]", self.buffer_dtype[name])
        if name in self.locals:
            return self.locals[name]
        dtype = self.buffer_dtype[name]
        index = simplify_index(index)
        if self.inner_range is not None:
            index = self._within_piece(index)
        expr = f"{self.ptr(name)}[{cexpr(index)}]"
        if dtype == torch.bfloat16:
            expr = f"dl_from_bf16({expr})"
        elif dtype == torch.float16:
            expr = f"static_cast<float>({expr})"
        elif dtype == torch.bool:
            expr = f"static_cast<bool>({expr})"  # read as uint8_t (see _param_ctype)
        return self.emit(expr, dtype)

    def store(self, name, index, value: CSEVar):
        dtype = self.buffer_dtype[name]
        if name in self.scratch:
            v = self.overrides.to_dtype(value, dtype) if value.dtype != dtype else value
            self.line(f"scratch_{name}[{self._flat_r()}] = {v.name};")
            self.scope.cache[f"scratch_{name}[{self._flat_r()}]"] = v
            return
        if name in self.local_buffers:
            v = self.overrides.to_dtype(value, dtype) if value.dtype != dtype else value
            self.locals[name] = v
            return
        v = value.name
        if dtype == torch.bfloat16:
            v = f"dl_to_bf16({v})"
        elif dtype == torch.float16:
            v = f"static_cast<dl_half>({v})"
        elif dtype == torch.bool:
            v = f"static_cast<uint8_t>(static_cast<bool>({v}))"
        elif value_ctype(value.dtype) != STORAGE_CTYPE[dtype]:
            v = f"static_cast<{STORAGE_CTYPE[dtype]}>({v})"
        target = f"{self.ptr(name, out=True)}[{cexpr(simplify_index(index))}]"
        self.line(f"{target} = {v};")
        if v == value.name and dtype not in (torch.float16, torch.bfloat16):
            self.scope.cache[target] = value  # a later load of this element reuses the value

    def _flat_r(self) -> str:
        flat = sympy.Integer(0)
        for v, s in zip(self.rvars, self.rsizes):
            flat = flat * s + v
        return cexpr(flat)

    def indirect(self, v: CSEVar, size, checked=True):
        """A gather index, wrapped and checked like eager (the error flag); ``checked=False``:
        known in range (a constant table), used as it is."""
        name = f"idx{self.n}"
        self.n += 1
        target = self.scope
        if target.parent is not None and not self._inner_dependent(v.name):
            # an index fixed for the whole inner loop (an embedding row) is checked once,
            # before it: the error-flag store inside would keep the loop from vectorizing
            target = target.parent
        else:
            self.inner_vars.add(name)  # side effects (the error flag): not hoisted
        target.lines.append(f"int64_t {name} = static_cast<int64_t>({v.name});")
        if checked:
            self.uses_indirect = True
            s = cexpr(size)
            target.lines.append(f"if ({name} < 0) {name} += {s};")
            target.lines.append(f"if ({name} < 0 || {name} >= {s}) {{ *dl_err = 1; {name} = 0; }}")
        return sym(name)

    # --------------------------------------------------------------------- node bodies
    def _node_value(self, n):
        g = self.g
        idx, ridx = g.index_of(n)
        idx, ridx = self._final(idx), self._final(ridx)
        with V.set_handler(self.overrides):
            value = n.run_body(idx, ridx)
        return value, idx, ridx

    def _store_node(self, n, value, idx):
        index = sympy.expand(n.write_index(idx))
        self.store(n.name, index, value)

    # ------------------------------------------------------------------------ structure
    def codegen(self) -> str:
        g = self.g
        body = Scope()
        self.scope = body
        self.pw_inner = None
        if not g.has_reduction and len(self.xsizes) >= 2:
            self.inner_x = self.xvars[-1].name
            self.pw_inner = Scope(body)
            self.scope = self.pw_inner
            inner, outer = self.xsizes[-1], product(self.xsizes[:-1])
            if (
                is_static(inner)
                and is_static(outer)
                and int(inner) <= TABLE_MAX_INNER
                and int(outer) >= TABLE_MIN_OUTER
                and os.environ.get("DANLU_CPP_TABLES") != "0"
            ):
                self.table_size = int(inner)
        # symbolic sizes: decide by the hints (speed only; the code serves every size)
        xn, rn = hint(product(self.xsizes)), hint(product(self.rsizes))
        self.rn_static = is_static(product(self.rsizes))
        work = product(self.xsizes) * (product(self.rsizes) if g.has_reduction else 1)
        split = (
            g.has_reduction
            and xn < SPLIT_MAX_X
            and rn >= SPLIT_MIN_R
            and all(p in ("reduction", "x") for p in g.placements.values())
        )
        self.split = split
        self.vertical = not split and not self.scratch and vertical.wanted(self)
        pieces = self._inner_pieces() if self.pw_inner is not None else None
        piece_bodies = []
        if pieces:
            self.table_size = None  # a table fills the whole inner range; pieces read parts
            for first, end in pieces:
                self.pw_inner = self.scope = Scope(body)
                self.inner_range = (first, end)
                self.locals = {}
                for _, members in g.phases:  # pointwise: "x" phases only
                    self._x_phase(members)
                piece_bodies.append((first, end, self.pw_inner.lines))
            self.inner_range = None
        else:
            for kind, members in g.phases:
                if kind == "x":
                    self._x_phase(members)
                else:
                    self._reduction_phase(members, rn, split)
        inner = body.lines
        rn_decl = max(rn, 1)  # scratch rows exist for static reduction sizes only
        for name in sorted(self.scratch):
            ct = value_ctype(self.buffer_dtype[name])
            inner.insert(0, f"alignas(64) {ct} scratch_{name}[{rn_decl}];")
        lines = self._table_prelude()
        if not g.has_reduction and len(self.xsizes) >= 2:
            # outer loops (threads) / per-outer-index invariants / innermost simd loop
            innermost = []
            for first, end, piece in piece_bodies or [(0, self.xsizes[-1], self.pw_inner.lines)]:
                innermost += _loop_nest(
                    self.xvars[-1:],
                    [end],
                    piece,
                    parallel=False,
                    simd_inner=True,
                    starts=[first],
                )
            lines += _loop_nest(
                self.xvars[:-1],
                self.xsizes[:-1],
                inner + innermost,
                parallel=_parallel(xn >= PARALLEL_THRESHOLD, work),
                simd_inner=False,
            )
        elif not g.has_reduction:
            lines += _loop_nest(
                self.xvars,
                self.xsizes,
                inner,
                parallel=_parallel(xn >= PARALLEL_THRESHOLD, work),
                simd_inner=True,
            )
        elif self.vertical and vertical.chunked(self):
            lines += vertical.chunk_loop(
                self, inner, _parallel(xn * rn >= PARALLEL_THRESHOLD, work)
            )
        elif self.vertical:
            lines += _loop_nest(
                self.xvars[:-1],
                self.xsizes[:-1],
                vertical.body(self, inner),
                parallel=_parallel(xn * rn >= PARALLEL_THRESHOLD, work),
                simd_inner=False,
            )
        else:
            lines += _loop_nest(
                self.xvars,
                self.xsizes,
                inner,
                parallel=(not split) and xn > 1 and _parallel(xn * rn >= PARALLEL_THRESHOLD, work),
                simd_inner=False,
            )
        params = []
        for name, p in self.params.items():
            const = "" if self.param_out[name] else "const "
            params.append(f"{const}{_param_ctype(self.buffer_dtype[name])}* {p}")
        if self.uses_indirect:
            params.append("int64_t* dl_err")
        self.size_args = sorted(
            set(_SIZE_SYMBOL.findall("\n".join(lines))), key=lambda n: int(n[1:])
        )
        params += [f"int64_t {n}" for n in self.size_args]
        head = f'extern "C" void {self.kernel_name}({", ".join(params)})'
        return head + "\n{\n" + "\n".join("    " + ln for ln in lines) + "\n}\n"

    def _x_phase(self, members):
        """Members placed "x": each value computed and stored once per outer index."""
        for n in members:
            value, idx, _ = self._node_value(n)
            self._store_node(n, value, idx)

    def _reduction_phase(self, members, rn, split):
        outer = self.scope
        loop = Scope(outer)
        self.scope = loop
        accs = {}  # key -> (acc name, reduction kind, acc ctype, init, value dtype)
        results = []
        simd_ok = True
        nan_flags: dict[str, str] = {}
        for n in members:
            value, idx, ridx = self._node_value(n)
            if not n.is_reduction:
                self._store_node(n, value, idx)
                continue
            rtype = n.node.data.reduction_type
            base = "welford" if rtype.startswith("welford") else rtype
            key = (base, value.name)
            if key not in accs:
                acc = f"acc{self.n}"
                self.n += 1
                # a symbolic length may be long: the wide accumulator is always right
                ctype, init = _acc_type(base, value.dtype, rn if self.rn_static else None)
                accs[key] = (acc, base, ctype, init, value.dtype)
                if not split and base in ("max", "min"):
                    # vectorizable: plain compare-select plus a NaN flag, combined at the end
                    cmp = ">" if base == "max" else "<"
                    self.line(f"{acc} = ({value} {cmp} {acc}) ? {value} : {acc};")
                    if value.dtype.is_floating_point:
                        nan_flags[acc] = f"{acc}_nan"
                        # an int flag with `|`: a bool `||` reduction does not vectorize well
                        self.line(f"{acc}_nan |= static_cast<int>({value} != {value});")
                else:
                    self.line(_acc_update(base, acc, value, ridx, n.rranges))
                    if base not in ("sum", "prod"):
                        simd_ok = False
            results.append((n, rtype, accs[key][0], idx))
        self.scope = outer
        rvars, rsizes = self.rvars, self.rsizes
        if not split:
            for acc, _, ctype, init, _ in accs.values():
                self.line(f"{ctype} {acc} = {init};")
                if acc in nan_flags:
                    self.line(f"int {nan_flags[acc]} = 0;")
            if self.vertical:
                self.scope.lines.append(vertical.RLoop(loop.lines))
                return self._reduction_results(results, nan_flags)
            simd = None
            if simd_ok:
                clauses = ""
                for op, kind in (("+", "sum"), ("*", "prod"), ("max", "max"), ("min", "min")):
                    names = [a for a, b, *_ in accs.values() if b == kind]
                    if names:
                        clauses += f" reduction({op}:{','.join(names)})"
                if nan_flags:
                    clauses += f" reduction(|:{','.join(nan_flags.values())})"
                simd = "#pragma omp simd" + clauses
            self.scope.lines += _loop_nest(
                rvars,
                rsizes,
                loop.lines,
                parallel=False,
                simd_inner=simd is not None,
                simd_pragma=simd,
            )
        else:
            finals = [
                (n, rtype, acc, idx, *_result_expr(n, rtype, acc)) for n, rtype, acc, idx in results
            ]
            for n, _, _, _, _, vdt in finals:
                self.line(f"{value_ctype(vdt)} res_{n.name};")
            self.line("{")
            self.line("int dl_nt = 1;")
            for acc, _, ctype, _, _ in accs.values():
                self.line(f"{ctype} {acc}_part[{MAX_THREADS}];")
            self.line(
                f"#pragma omp parallel num_threads(std::min(omp_get_max_threads(), {MAX_THREADS}))"
            )
            self.line("{")
            self.line("int dl_tid = omp_get_thread_num();")
            self.line("#pragma omp single")
            self.line("dl_nt = omp_get_num_threads();")
            for acc, _, ctype, init, _ in accs.values():
                self.line(f"{ctype} {acc} = {init};")
            collapse = f" collapse({len(rvars)})" if len(rvars) > 1 else ""
            self.scope.lines += _loop_nest(
                rvars,
                rsizes,
                loop.lines,
                parallel=False,
                simd_inner=False,
                outer_pragma=f"#pragma omp for schedule(static){collapse}",
            )
            for acc, *_ in accs.values():
                self.line(f"{acc}_part[dl_tid] = {acc};")
            self.line("}")
            for acc, base, ctype, init, _ in accs.values():
                self.line(f"{ctype} {acc} = {init};")
                self.line(
                    f"for (int t = 0; t < dl_nt; t++) {_acc_combine(base, acc, acc + '_part[t]')}"
                )
            for n, _, _, _, expr, _ in finals:
                self.line(f"res_{n.name} = {expr};")
            self.line("}")
            for n, _, _, idx, _, vdt in finals:
                self._store_node(n, CSEVar(f"res_{n.name}", vdt), idx)
            return
        self._reduction_results(results, nan_flags)

    def _reduction_results(self, results, nan_flags):
        for n, rtype, acc, idx in results:
            expr, vdt = _result_expr(n, rtype, acc)
            if acc in nan_flags:
                expr = f"({nan_flags[acc]} ? std::numeric_limits<{value_ctype(vdt)}>::quiet_NaN() : {acc})"
            var = CSEVar(f"v_{n.name}", vdt)
            self.line(f"{value_ctype(vdt)} {var.name} = {expr};")
            self._store_node(n, var, idx)


def _param_ctype(dtype) -> str:
    # bool tensors are read and written through uint8_t pointers: gcc does not vectorize a
    # loop that loads `bool` next to floats (a masked softmax ran scalar, 7x slower)
    return "uint8_t" if dtype == torch.bool else STORAGE_CTYPE[dtype]


def _result_expr(n, rtype, acc):
    src = n.node.data.src_dtype
    if rtype == "welford_mean":
        return f"static_cast<{value_ctype(src)}>({acc}.mean)", src
    if rtype == "welford_m2":
        return f"static_cast<{value_ctype(src)}>({acc}.m2)", src
    if rtype in ("argmax", "argmin"):
        return f"{acc}.index", torch.int64
    return acc, _acc_dtype(rtype, src)


def _acc_dtype(rtype, src):
    if rtype in ("any", "all"):
        return torch.bool
    return src


def _acc_type(base, dtype, rnumel=1):
    ct = value_ctype(dtype)
    if base in ("sum", "prod") and ct == "float" and (rnumel is None or rnumel > WIDE_ACC_MIN_R):
        ct = "double"  # long float32 sums: eager sums pairwise; a double accumulator keeps up
    if base == "sum":
        return ct, f"{ct}(0)"
    if base == "prod":
        return ct, f"{ct}(1)"
    if base in ("max", "min"):
        if dtype.is_floating_point:
            sign = "-" if base == "max" else ""
            return ct, f"{sign}std::numeric_limits<{ct}>::infinity()"
        if dtype == torch.bool:
            return ct, "false" if base == "max" else "true"
        lim = "lowest" if base == "max" else "max"
        return ct, f"std::numeric_limits<{ct}>::{lim}()"
    if base == "any":
        return "bool", "false"
    if base == "all":
        return "bool", "true"
    if base == "welford":
        return "dl_welford", "dl_welford()"
    if base in ("argmax", "argmin"):
        return f"dl_arg<{ct}>", f"dl_arg<{ct}>{{{ct}(0), -1}}"
    raise NotImplementedError(base)


def _acc_update(base, acc, v, ridx, rranges):
    if base == "sum":
        return f"{acc} = {acc} + {v};"
    if base == "prod":
        return f"{acc} = {acc} * {v};"
    if base == "max":
        return f"{acc} = dl_max({acc}, {v});"
    if base == "min":
        return f"{acc} = dl_min({acc}, {v});"
    if base == "any":
        return f"{acc} = {acc} || static_cast<bool>({v});"
    if base == "all":
        return f"{acc} = {acc} && static_cast<bool>({v});"
    if base == "welford":
        return f"{acc} = dl_welford_add({acc}, static_cast<double>({v}));"
    if base in ("argmax", "argmin"):
        flat = sympy.Integer(0)
        for r, s in zip(ridx, rranges):
            flat = flat * s + r
        return (
            f"{acc} = dl_{base}_add({acc}, {v}, static_cast<int64_t>({cexpr(sympy.expand(flat))}));"
        )
    raise NotImplementedError(base)


def _acc_combine(base, acc, other):
    if base == "sum":
        return f"{acc} = {acc} + {other};"
    if base == "prod":
        return f"{acc} = {acc} * {other};"
    if base in ("max", "min"):
        return f"{acc} = dl_{base}({acc}, {other});"
    if base == "any":
        return f"{acc} = {acc} || {other};"
    if base == "all":
        return f"{acc} = {acc} && {other};"
    if base == "welford":
        return f"{acc} = dl_welford_combine({acc}, {other});"
    if base in ("argmax", "argmin"):
        return (
            f"if ({other}.index >= 0) {acc} = dl_{base}_add({acc}, {other}.value, {other}.index);"
        )
    raise NotImplementedError(base)


def _merge_dims(sizes, variables, exprs, prefix):
    """Merge adjacent loops when every access moves through them like one flat loop
    (coefficient of the outer = coefficient of the inner * inner size). Returns the new sizes
    and the substitution old variable -> expression of new variables."""
    sizes = as_exprs(sizes)
    ones = [k for k, s in enumerate(sizes) if s == 1]
    if ones and len(sizes) > 1:
        # a size-1 dim's variable is always 0: drop the loop (else a leading batch dim of 1
        # would be the only parallel loop, and the kernel would run on one thread)
        keep = [k for k in range(len(sizes)) if sizes[k] != 1]
        zero = {variables[k]: sympy.Integer(0) for k in ones}
        exprs = [sympy.expand(sympy.sympify(e).xreplace(zero)) for e in exprs]
        kept_sizes, sub = _merge_dims(
            [sizes[k] for k in keep], [variables[k] for k in keep], exprs, prefix
        )
        if not sub:  # nothing merged: the kept dims get fresh, consecutive names
            new_vars = index_vars(prefix, len(keep))
            sub = {variables[k]: v for k, v in zip(keep, new_vars)}
        return kept_sizes, {**zero, **sub}
    if len(sizes) <= 1:
        return list(sizes), {}
    # groups of adjacent dims to merge
    groups = [[0]]
    for k in range(1, len(sizes)):
        a, b = variables[k - 1], variables[k]
        ok = True
        for e in exprs:
            if not (e.has(a) or e.has(b)):
                continue
            da, db = sympy.diff(e, a), sympy.diff(e, b)
            if not (_size_only(da) and _size_only(db) and sympy.expand(da - db * sizes[k]) == 0):
                ok = False
                break
        if ok:
            groups[-1].append(k)
        else:
            groups.append([k])
    if all(len(gr) == 1 for gr in groups):
        return list(sizes), {}
    new_vars = index_vars(prefix, len(groups))
    new_sizes, sub = [], {}
    for gv, gr in zip(new_vars, groups):
        total = sympy.Integer(1)
        for k in gr:
            total *= sizes[k]
        new_sizes.append(total)
        rest = gv
        # innermost dim = rest mod size, written as rest - size*floor(rest/size) so that
        # affine accesses cancel back to the flat variable
        for k in reversed(gr[1:]):
            q = FloorDiv(rest, sizes[k])
            sub[variables[k]] = rest - sizes[k] * q
            rest = q
        sub[variables[gr[0]]] = rest
    # rename: old variables may share names with new ones, so go through temporaries
    return new_sizes, sub


def _parallel(static_choice: bool, work):
    """Threads or not: decided now for static sizes; for symbolic ones an OpenMP ``if``
    clause decides at run time (the same threshold on the actual amount of work)."""
    if is_static(work):
        return static_choice
    return f"{cexpr(work)} >= {PARALLEL_THRESHOLD}"


def _size_only(e) -> bool:
    """A loop-invariant coefficient: a number or an expression of symbolic sizes only."""
    return e.is_Integer or all(_SIZE_SYMBOL.fullmatch(v.name) for v in e.free_symbols)
