"""Index and size expressions as Python source (the wrapper evaluates symbolic sizes)."""

from __future__ import annotations

import sympy

from danlu_inductor.codegen.index_printer import IndexPrinter


class _PythonIndex(IndexPrinter):
    """Non-negative operands, so ``//`` and ``%`` agree with the C semantics the kernels use."""

    what = "size expression"

    def clamp(self, a, lo, hi):
        return f"min(max({a}, {lo}), {hi})"

    def power(self, base, n):
        return f"({base} ** {n})"

    def extremum(self, name, args):
        return f"{name}(" + ", ".join(args) + ")"


pexpr = _PythonIndex()  # a size expression as Python over the symbols' names


def ptuple(exprs) -> str:
    """A tuple of sizes as Python source; all-static tuples print as before (``(2, 3)``)."""
    exprs = [sympy.sympify(e) for e in exprs]
    if all(e.is_Integer for e in exprs):
        return repr(tuple(int(e) for e in exprs))
    return "(" + ", ".join(pexpr(e) for e in exprs) + ("," if len(exprs) == 1 else "") + ")"
