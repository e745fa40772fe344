"""Sympy helpers for sizes, strides and loop indices.

Every size, stride and index in the IR is a sympy expression. Loop indices are integer
symbols named ``x0, x1, ...`` (outer, parallel loops) and ``r0, r1, ...`` (reduction loops);
all are non-negative, so integer division and modulo print as plain C ``/`` and ``%``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Sequence

import sympy

Expr = sympy.Expr
_SIZE_NAME = re.compile(r"s\d+")


class NotLowered(Exception):
    """This call cannot be lowered (yet); use a fallback kernel."""


class DynamicShapeUnsupported(NotLowered):
    """A symbolic size reached code that needs a number. Inside a lowering the op becomes a
    fallback kernel; elsewhere the whole graph runs eagerly (``compile_fx`` says why)."""


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative integer ``a`` and positive integer ``b`` (index math only)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        # (a // m) // n == a // (m*n): one canonical form, so that reshape splits can be
        # matched up again (``simplify_index``)
        if isinstance(a, FloorDiv) and a.args[1].is_Integer and b.is_Integer:
            return FloorDiv(a.args[0], a.args[1] * b)
        # (k*b*u + v) // b == k*u + v // b when the k*b*u terms are exact multiples.
        if b.is_Integer and isinstance(a, sympy.Add):
            whole, rest = [], []
            for term in a.args:
                coeff, _ = term.as_coeff_Mul()
                (whole if coeff.is_Integer and int(coeff) % int(b) == 0 else rest).append(term)
            if whole and rest:
                return sympy.Add(*whole) / b + FloorDiv(sympy.Add(*rest), b)
            if whole and not rest:
                return a / b
        if b.is_Integer and isinstance(a, sympy.Mul):
            coeff, _ = a.as_coeff_Mul()
            if coeff.is_Integer and int(coeff) % int(b) == 0:
                return a / b
        return None


class IMod(sympy.Function):
    """``a % b`` for non-negative integer ``a`` and positive integer ``b`` (index math only)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        if b.is_Integer and isinstance(a, sympy.Add):
            rest = []
            for term in a.args:
                coeff, _ = term.as_coeff_Mul()
                if not (coeff.is_Integer and int(coeff) % int(b) == 0):
                    rest.append(term)
            if len(rest) < len(a.args):
                return IMod(sympy.Add(*rest), b)
        if b.is_Integer and isinstance(a, sympy.Mul):
            coeff, _ = a.as_coeff_Mul()
            if coeff.is_Integer and int(coeff) % int(b) == 0:
                return sympy.Integer(0)
        return None


class Clamp(sympy.Function):
    """``min(max(a, lo), hi)``: keeps a masked-off index inside its buffer (cat, pad)."""

    is_integer = True

    @classmethod
    def eval(cls, a, lo, hi):
        if a.is_Integer and lo.is_Integer and hi.is_Integer:
            return sympy.Integer(min(max(int(a), int(lo)), int(hi)))
        return None


class SelectedClamp(Clamp):
    """A ``Clamp`` whose load is used only where ``lo <= a <= hi`` (a cat's input, a padded
    tensor: a select discards the rest). Code generation may mask the load instead of
    clamping its index (Triton: out-of-range lanes read no memory). A plain ``Clamp``'s
    value is used as is (max pooling reads the window's edge in its padding)."""


def sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def index_vars(prefix: str, n: int) -> list[sympy.Symbol]:
    return [sym(f"{prefix}{i}") for i in range(n)]


def as_expr(v) -> Expr:
    if isinstance(v, sympy.Basic):
        return v
    return sympy.Integer(int(v))


def as_exprs(vs: Sequence) -> list[Expr]:
    return [as_expr(v) for v in vs]


def product(vs: Sequence) -> Expr:
    known, out = 1, None  # integers multiply as Python ints (the scheduler asks 100,000s of times)
    for v in vs:
        if isinstance(v, int) or getattr(v, "is_Integer", False):
            known *= int(v)
        else:
            out = as_expr(v) if out is None else out * as_expr(v)
    return sympy.Integer(known) if out is None else out * known


def contiguous_strides(sizes: Sequence[Expr]) -> list[Expr]:
    strides, acc = [], sympy.Integer(1)
    for s in reversed(list(sizes)):
        strides.append(acc)
        acc = acc * sympy.Max(as_expr(s), 1)
    return list(reversed(strides))


def linear_index(index: Sequence[Expr], strides: Sequence[Expr], offset: Expr = 0) -> Expr:
    out = as_expr(offset)
    for i, s in zip(index, strides):
        out = out + i * s
    return out


def to_int(e) -> int:
    """A static integer value (raises ``DynamicShapeUnsupported`` for a symbolic one)."""
    e = as_expr(e)
    if not e.is_Integer:
        raise DynamicShapeUnsupported(f"symbolic size {e} where a number is needed")
    return int(e)


# ------------------------------------------------------------------- symbolic sizes
# Sizes of graphs traced with dynamic shapes are expressions over the ShapeEnv's symbols
# (``s0, s1, ...``, integer and >= 2). Decisions that only affect speed use the size hint
# (the value at the first call); the generated code stays valid for every size.


class _Hints(threading.local):
    values: dict | None = None


_hints = _Hints()


@contextlib.contextmanager
def size_hints(values: dict | None):
    """Scope ``{symbol: example value}`` for ``hint`` (None: static graph)."""
    prev = _hints.values
    _hints.values = values
    try:
        yield
    finally:
        _hints.values = prev


def is_static(e) -> bool:
    return as_expr(e).is_Integer


def hint(e) -> int:
    """``e``'s value at the example sizes (``e`` itself when it is a number)."""
    e = as_expr(e)
    if e.is_Integer:
        return int(e)
    values = _hints.values or {}
    v = e.xreplace({s: sympy.Integer(values[s]) for s in e.free_symbols if s in values})
    if not v.is_Integer:
        v = sympy.sympify(v).doit()
    if not v.is_Integer:
        raise DynamicShapeUnsupported(f"no size hint for {e}")
    return int(v)


def hint_of_name(name: str) -> int:
    """The hint of the size symbol called ``name`` (kernels list their size arguments by
    name)."""
    for s, v in (_hints.values or {}).items():
        if s.name == name:
            return int(v)
    raise DynamicShapeUnsupported(f"no size hint for {name}")


def hints(es: Sequence) -> list[int]:
    return [hint(e) for e in es]


def same(a, b) -> bool:
    """``a == b`` for every size (decided on the expressions, never on hints)."""
    a, b = as_expr(a), as_expr(b)
    if a.is_Integer and b.is_Integer:
        return int(a) == int(b)
    return a == b or sympy.expand(a - b) == 0


def same_sizes(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def is_size_symbol(s) -> bool:
    """A symbol of a symbolic size (the ShapeEnv's ``s0, s1, ...``), not a loop index."""
    return bool(_SIZE_NAME.fullmatch(s.name))


def _size_polynomial(e) -> bool:
    """An integer, or an integer polynomial in size symbols (a symbolic stride/offset)."""
    if e.is_Integer:
        return True
    if not e.free_symbols or not all(is_size_symbol(s) for s in e.free_symbols):
        return False
    return e.is_polynomial(*e.free_symbols) and all(
        c.is_Integer for c in sympy.Poly(e, *e.free_symbols).coeffs()
    )


def affine_coefficients(expr: Expr, variables: Sequence[sympy.Symbol]):
    """``(coeffs, constant)`` if ``expr`` is affine in ``variables`` with integer coefficients
    and a constant free of them (integers, or integer polynomials of symbolic sizes); None
    otherwise."""
    expr = sympy.expand(expr)
    coeffs = []
    for v in variables:
        c = expr.coeff(v, 1)
        if c.free_symbols & set(variables) or not _size_polynomial(c):
            return None
        coeffs.append(c)
    const = expr - sum((c * v for c, v in zip(coeffs, variables)), sympy.Integer(0))
    const = sympy.expand(const)
    if const.free_symbols & set(variables) or not _size_polynomial(const):
        return None
    return coeffs, const


def _coeff_and_divmod(term: Expr) -> tuple[Expr, Expr]:
    """``term`` as (coefficient, factor): the factor its one FloorDiv or IMod when it has one,
    the coefficient everything else, symbols included (``128*s0*FloorDiv(v, s0)`` is
    ``(128*s0, FloorDiv(v, s0))``: a symbolic length's reshape folds back as a static one's)."""
    if isinstance(term, sympy.Mul):
        divmods = [f for f in term.args if isinstance(f, (FloorDiv, IMod))]
        if len(divmods) == 1:
            rest = [f for f in term.args if f is not divmods[0]]
            return sympy.Mul(*rest), divmods[0]
    return term.as_coeff_Mul()


def _merged_quotients(x, n) -> list:
    """``x // n`` in the form FloorDiv takes when ``x = k + r // m`` (k an integer sum) was
    itself simplified from ``(k*m + r) // m``: ``(k*m + r) // (m*n)``. A split reduction's
    chunk index (flat = chunk * x0 + r0) reaches a channels-last image's (h, w) through both
    forms, and only this one matches the outer quotient."""
    if not isinstance(x, sympy.Add):
        return []
    divs = [t for t in x.args if isinstance(t, FloorDiv)]
    if len(divs) != 1 or not divs[0].args[1].is_Integer:
        return []
    r, m = divs[0].args
    k = x - divs[0]
    if not (k.is_integer and m > 0):
        return []
    return [FloorDiv(sympy.expand(k * m + r), m * n)]


@functools.lru_cache(maxsize=8192)  # pure; a graph's kernels load through few distinct indices
def simplify_index(expr: Expr) -> Expr:
    """Undo div/mod splits that a reshape introduced: ``c*(a % n) + c*n*(a // n) -> c*a``,
    also one level down (``c*((a // m) % n) + c*n*(a // (m*n)) -> c*(a // m)``), so a
    flattening of several dims folds back one pair at a time."""
    expr = sympy.expand(expr)
    if not isinstance(expr, sympy.Add):
        return expr
    terms = list(expr.args)
    changed = True
    while changed:
        changed = False
        parts = [_coeff_and_divmod(t) for t in terms]
        for i, (c1, f1) in enumerate(parts):
            if not isinstance(f1, IMod):
                continue
            x, n = f1.args
            # x is a // m (m = 1: x itself); its quotient by n is a // (m*n)
            base, m = (x.args[0], x.args[1]) if isinstance(x, FloorDiv) else (x, 1)
            outers = {FloorDiv(base, m * n), *_merged_quotients(x, n)}
            for j, (c2, f2) in enumerate(parts):
                if f2 in outers and c2 == c1 * n:
                    rest = [t for k, t in enumerate(terms) if k not in (i, j)]
                    terms = list(sympy.Add(*rest, c1 * x).as_ordered_terms())
                    changed = True
                    break
            if changed:
                break
    return sympy.expand(sympy.Add(*terms))


def affine_on_loop(index, loop, samples: int = 12) -> bool:
    """Whether ``index`` walks memory as an affine function of the loop variables over the
    loop space ``[(var, size), ...]``: the slopes read at the origin, then checked at the far
    corner and at ``samples`` pseudo-random points (a cost estimate, never a legality proof:
    it sees through div/mod nests that ``simplify_index`` cannot fold). Undecidable indices
    (symbols other than the loop's) count as affine."""
    import random

    sizes = [(v, hint(s)) for v, s in loop if index.has(v)]

    def at(point):
        value = index.xreplace({v: sympy.Integer(i) for (v, _), i in zip(sizes, point)})
        return int(value) if value.is_Integer else None

    origin = at([0] * len(sizes))
    if origin is None:
        return True
    slopes = []
    for k, (_, size) in enumerate(sizes):
        step = at([1 if j == k else 0 for j in range(len(sizes))]) if size > 1 else origin
        if step is None:
            return True
        slopes.append(step - origin)
    rng = random.Random(0)
    points = [[size - 1 for _, size in sizes]]
    points += [[rng.randrange(max(size, 1)) for _, size in sizes] for _ in range(samples)]
    for point in points:
        value = at(point)
        if value is None:
            return True
        if value != origin + sum(c * i for c, i in zip(slopes, point)):
            return False
    return True


def unit_stride(index, var, loop) -> bool:
    """Whether one step of ``var`` moves ``index`` by one element: read off the expression
    when ``var`` appears linearly, else tried at three points of the loop space (a flattened
    index that the reshape's divisions keep from folding)."""
    if index.coeff(var, 1) == 1:
        return True
    sizes = {v: hint(s) for v, s in loop}
    if sizes[var] < 2:
        return False
    for pick in (lambda s: 0, lambda s: (s - 1) // 2, lambda s: max(s - 2, 0)):
        at = {v: min(pick(s), s - 1) for v, s in sizes.items()}
        at[var] = min(at[var], sizes[var] - 2)
        here = index.xreplace({v: sympy.Integer(i) for v, i in at.items()})
        at[var] += 1
        there = index.xreplace({v: sympy.Integer(i) for v, i in at.items()})
        if not (there - here).is_Integer or int(there - here) != 1:
            return False
    return True
