"""Integer functions sympy lacks, with the semantics of Python ints.

``FloorDiv(a, b)`` is Python's ``a // b``; ``sympy.Mod`` already follows Python's ``%`` (the
result takes the divisor's sign), so it is used as it is. ``FloorDiv`` simplifies the cases
sizes produce: exact division of every term (``FloorDiv(4*s0, 4) == s0``), division by 1, and
nested divisions by positive constants.
"""

from __future__ import annotations

import sympy


class FloorDiv(sympy.Function):
    """``a // b`` on integers (rounds toward minus infinity)."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 0:
            raise ZeroDivisionError("integer division by zero in a symbolic size")
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if a == b:
            return sympy.Integer(1)
        if b.is_Integer and int(b) > 0:
            if isinstance(a, FloorDiv) and a.args[1].is_Integer and int(a.args[1]) > 0:
                return FloorDiv(a.args[0], a.args[1] * b)
            terms = sympy.Add.make_args(a)
            if all(_divisible(t, int(b)) for t in terms):
                return sympy.Add(*[t / b for t in terms])
        if not b.is_Number:
            # (k * b) // b == k for an integer polynomial k, e.g. (s0*s1) // s1.
            q = sympy.cancel(a / b)
            if _is_integer_polynomial(q):
                return q
        return None

    def _sympystr(self, printer):
        a, b = self.args
        return f"({printer.parenthesize(a, 60)}//{printer.parenthesize(b, 60)})"


def _is_integer_polynomial(q) -> bool:
    if q.is_Integer:
        return True
    symbols = q.free_symbols
    if not symbols or not all(s.is_integer for s in symbols) or not q.is_polynomial(*symbols):
        return False
    return all(c.is_Integer for c in sympy.Poly(q, *symbols).coeffs())


def _divisible(term, b: int) -> bool:
    coeff, _ = term.as_coeff_Mul()
    return coeff.is_Integer and int(coeff) % b == 0


def is_contiguous_expr(sizes, strides, order) -> sympy.Basic:
    """True when ``strides`` are the dense strides of ``sizes`` laid out in ``order`` (innermost
    first); dims of size 1 may have any stride."""
    cond = sympy.true
    if any(s == 0 for s in sizes):
        return sympy.true  # an empty tensor is contiguous whatever its strides
    expected = sympy.Integer(1)
    for d in order:
        size, stride = sizes[d], strides[d]
        cond = sympy.And(cond, sympy.Or(sympy.Eq(size, 1), sympy.Eq(stride, expected)))
        expected = expected * size
    return cond
