"""Value ranges: interval bounds of integer expressions, used to decide comparisons statically.

``bounds(expr, ranges)`` returns ``(lo, hi)`` (sympy numbers, possibly infinite) such that
every value of ``expr`` lies in ``[lo, hi]`` when each symbol lies in its range. It is sound
and simple, not tight: ``s0 - s0`` is simplified by sympy before it gets here, but
``s0*s1 - s0`` would get loose bounds.
"""

from __future__ import annotations

import itertools

import sympy

from .functions import FloorDiv

INF = sympy.oo
UNBOUNDED = (-sympy.oo, sympy.oo)


def _mul(a, b):
    # Interval product; 0 * oo counts as 0 (a size that is 0 times any bound).
    if a == 0 or b == 0:
        return sympy.Integer(0)
    return a * b


def bounds(expr, ranges: dict) -> tuple:
    if expr.is_Number:
        return (expr, expr)
    if expr.is_Symbol:
        return ranges.get(expr, UNBOUNDED)
    if isinstance(expr, sympy.Add):
        lo, hi = sympy.Integer(0), sympy.Integer(0)
        for t in expr.args:
            tlo, thi = bounds(t, ranges)
            lo, hi = lo + tlo, hi + thi
        return (lo, hi)
    if isinstance(expr, sympy.Mul):
        lo, hi = sympy.Integer(1), sympy.Integer(1)
        for t in expr.args:
            tlo, thi = bounds(t, ranges)
            products = [_mul(x, y) for x, y in itertools.product((lo, hi), (tlo, thi))]
            lo, hi = min(products), max(products)
        return (lo, hi)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        lo, hi = bounds(expr.base, ranges)
        e = int(expr.exp)
        if e >= 0 and lo >= 0:
            return (lo**e, hi**e)
        if e < 0 and lo > 0:
            return (hi**e, lo**e)
        return UNBOUNDED
    if isinstance(expr, FloorDiv):
        a, b = expr.args
        if b.is_Number and b > 0:
            lo, hi = bounds(a, ranges)
            return (sympy.floor(lo / b), sympy.floor(hi / b))
        return UNBOUNDED
    if isinstance(expr, sympy.Mod):
        a, b = expr.args
        if b.is_Number and b > 0:
            lo, hi = bounds(a, ranges)
            if lo >= 0 and hi < b:
                return (lo, hi)
            return (sympy.Integer(0), b - 1)
        return UNBOUNDED
    if isinstance(expr, (sympy.Max, sympy.Min)):
        parts = [bounds(a, ranges) for a in expr.args]
        pick = max if isinstance(expr, sympy.Max) else min
        return (pick(p[0] for p in parts), pick(p[1] for p in parts))
    if isinstance(expr, (sympy.floor, sympy.ceiling)):
        lo, hi = bounds(expr.args[0], ranges)
        f = sympy.floor if isinstance(expr, sympy.floor) else sympy.ceiling
        return (f(lo), f(hi))
    return UNBOUNDED


def decide(rel, ranges: dict):
    """True / False when ``rel`` (a sympy relational or boolean) holds for every value in the
    ranges, or for none; None when it depends on the values."""
    if rel is sympy.true or rel is True:
        return True
    if rel is sympy.false or rel is False:
        return False
    if isinstance(rel, sympy.Not):
        r = decide(rel.args[0], ranges)
        return None if r is None else not r
    if isinstance(rel, sympy.And):
        results = [decide(a, ranges) for a in rel.args]
        if any(r is False for r in results):
            return False
        return True if all(r is True for r in results) else None
    if isinstance(rel, sympy.Or):
        results = [decide(a, ranges) for a in rel.args]
        if any(r is True for r in results):
            return True
        return False if all(r is False for r in results) else None
    if not isinstance(rel, sympy.core.relational.Relational):
        return None
    diff = sympy.expand(rel.lhs - rel.rhs)
    result = _decide_sign(rel, *bounds(diff, ranges))
    if result is None and diff.free_symbols:
        # Products of sizes (strides compared with strides): the factored form bounds better,
        # e.g. 96*s1 - 96*s0*s1 = -96*s1*(s0 - 1) <= -96*2*1 for s0, s1 >= 2.
        result = _decide_sign(rel, *bounds(sympy.factor(diff), ranges))
    return result


def _decide_sign(rel, lo, hi):
    """Decide ``rel`` from bounds ``[lo, hi]`` of ``rel.lhs - rel.rhs``."""
    if isinstance(rel, sympy.Eq):
        if lo == hi == 0:
            return True
        return False if (lo > 0 or hi < 0) else None
    if isinstance(rel, sympy.Ne):
        r = _decide_sign(sympy.Eq(rel.lhs, rel.rhs, evaluate=False), lo, hi)
        return None if r is None else not r
    if isinstance(rel, sympy.StrictLessThan):
        return True if hi < 0 else (False if lo >= 0 else None)
    if isinstance(rel, sympy.LessThan):
        return True if hi <= 0 else (False if lo > 0 else None)
    if isinstance(rel, sympy.StrictGreaterThan):
        return True if lo > 0 else (False if hi <= 0 else None)
    if isinstance(rel, sympy.GreaterThan):
        return True if lo >= 0 else (False if hi < 0 else None)
    return None
