"""Reductions along an outer dim, vectorized across the innermost kept dim ("vertical").

A channels-last tensor reduced over its spatial dims (a squeeze-excite block's mean, a global
average pool) keeps channels innermost in memory while the reduction walks H and W: a row per
(batch, channel) with stride C between its elements. The usual kernel (one accumulator per
row, the reduction loop innermost) then reads with stride C and cannot vectorize. Here the
innermost kept dim becomes the innermost loop of every phase instead, with one accumulator
per index in an array:

    for outer kept dims (threads):
        for c (simd): values of the kept dims used later, into arrays; accumulators = init
        for r...:
            for c (simd): the reduction body, acc[c] updated      <- consecutive addresses
        for c (simd): results, stores

Chosen for a kernel whose accesses move by one element along that dim and never along the
innermost reduction dim (``wanted``); the arithmetic is the same, per accumulator, as the
row-wise kernel's, in the same order.
"""

from __future__ import annotations

import os
import re

import sympy

from danlu_inductor.codegen.cpp.loops import loop_nest as _loop_nest
from danlu_inductor.codegen.cpp.printer import cexpr
from danlu_inductor.ir.symbols import is_static, product

MAX_INNER = 4096  # accumulator arrays live on the stack
MIN_INNER = 8  # one vector
# with no other kept dim for the threads to share, they take chunks of the vectorized one
CHUNK = 64

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DECL = re.compile(r"^(?:alignas\(\d+\) )?([A-Za-z_][\w:<>, ]*?) ([A-Za-z_]\w*) = (.*);$")
# what makes an expression more than a literal: a value, a loop index, memory, a size
_REFERENCE = re.compile(r"\b(tmp\d+|acc\d+\w*|idx\d+|v_\w+|res_\w+|[xr]\d+|\w*ptr\d+|s\d+)\b|\[")


class RLoop:
    """A reduction loop's body, placed among the kernel's kept-dim lines (vertical mode)."""

    def __init__(self, lines):
        self.lines = lines


def wanted(kernel) -> bool:
    """Whether ``kernel`` (a ``CppKernel`` before code generation) should be vertical."""
    g = kernel.g
    if os.environ.get("DANLU_CPP_VERTICAL") == "0":
        return False
    if not g.has_reduction or not kernel.xsizes or not kernel.rsizes:
        return False
    inner = kernel.xsizes[-1]
    sizes = [*kernel.xsizes, *kernel.rsizes]
    if not all(is_static(s) for s in sizes) or not MIN_INNER <= int(inner) <= MAX_INNER:
        return False
    xi, ri = kernel.xvars[-1], kernel.rvars[-1]
    along_x = False
    for e in kernel._final(kernel.accesses):
        e = sympy.expand(sympy.sympify(e))
        if ri not in e.free_symbols:
            continue
        cx, cr = sympy.diff(e, xi), sympy.diff(e, ri)
        if not (cx.is_Integer and cr.is_Integer):
            return False
        if cx == 0:
            # the same for every kept index (a layer norm's per-position mean and rstd
            # beside per-channel sums): loaded once per reduction step either way
            continue
        if cr == 1:
            return False  # the reduction already walks memory in order
        along_x |= cx == 1
    return along_x


def chunked(kernel) -> bool:
    """Threads over chunks of the vectorized dim: no other kept dim, and enough chunks."""
    return int(product(kernel.xsizes[:-1])) == 1 and int(kernel.xsizes[-1]) >= 2 * CHUNK


def chunk_loop(kernel, items, parallel) -> list[str]:
    """The whole kernel when ``chunked``: each chunk of the vectorized dim is one iteration."""
    size = int(kernel.xsizes[-1])
    n = -(-size // CHUNK)
    head = ["#pragma omp parallel for"] if parallel else []
    inner = [
        f"const int64_t dl_lo = dl_chunk * {CHUNK};",
        f"const int64_t dl_hi = std::min<int64_t>({size}, dl_lo + {CHUNK});",
        *body(kernel, items, "dl_lo", "dl_hi"),
    ]
    return [
        *head,
        f"for (int64_t dl_chunk = 0; dl_chunk < {n}; dl_chunk++)",
        "{",
        *["    " + line for line in inner],
        "}",
    ]


def body(kernel, items, lo="0", hi=None) -> list[str]:
    """The body of one outer iteration: ``items`` is the kernel's kept-dim lines with an
    ``RLoop`` for each reduction loop; the vectorized dim runs from ``lo`` to ``hi``."""
    xi, size = kernel.xvars[-1].name, cexpr(kernel.xsizes[-1])
    hi = size if hi is None else hi
    segments: list[tuple[str, list[str]]] = []
    for item in items:
        if isinstance(item, RLoop):
            segments.append(("r", list(item.lines)))
        elif segments and segments[-1][0] == "x":
            segments[-1][1].append(item)
        else:
            segments.append(("x", [item]))
    # values declared in one kept-dim segment and read in another: one per index, in arrays;
    # literals stay scalars before everything
    prefix, arrays = [], {}
    names_in = [set(_IDENT.findall("\n".join(lines))) for _, lines in segments]
    for k, (kind, lines) in enumerate(segments):
        if kind != "x":
            continue
        kept = []
        for line in lines:
            m = _DECL.match(line)
            if m and not m.group(2).startswith("acc") and not _REFERENCE.search(m.group(3)):
                prefix.append(line)
                continue
            kept.append(line)
            if m and any(m.group(2) in names for j, names in enumerate(names_in) if j != k):
                arrays[m.group(2)] = m.group(1)
        lines[:] = kept
    prefix += [f"alignas(64) {ctype} {name}_v[{size}];" for name, ctype in arrays.items()]
    if arrays:
        names = re.compile(r"\b(" + "|".join(map(re.escape, arrays)) + r")\b")
    out = list(prefix)
    for kind, lines in segments:
        lines = [_arrayify(line, arrays, names, xi) for line in lines] if arrays else lines
        inner = ["#pragma omp simd", f"for (int64_t {xi} = {lo}; {xi} < {hi}; {xi}++)", "{"]
        inner += ["    " + line for line in lines] + ["}"]
        if kind == "x":
            out += inner
        else:
            out += _loop_nest(kernel.rvars, kernel.rsizes, inner, parallel=False, simd_inner=False)
    return out


def _arrayify(line, arrays, names, xi):
    m = _DECL.match(line)
    if m and m.group(2) in arrays:
        line = f"{m.group(2)} = {m.group(3)};"
    return names.sub(lambda mm: f"{mm.group(1)}_v[{xi}]", line)
