"""Index and size expressions as Python source (the wrapper evaluates symbolic sizes)."""

from __future__ import annotations

import sympy

from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod


def pexpr(e) -> str:
    """``e`` as a Python integer expression over the symbols' names (non-negative operands,
    so ``//`` and ``%`` agree with the C semantics the kernels use)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(pexpr(a) for a in e.args) + ")"
    if isinstance(e, sympy.Mul):
        return "(" + " * ".join(pexpr(a) for a in e.args) + ")"
    if isinstance(e, FloorDiv):
        return f"({pexpr(e.args[0])} // {pexpr(e.args[1])})"
    if isinstance(e, IMod):
        return f"({pexpr(e.args[0])} % {pexpr(e.args[1])})"
    if isinstance(e, Clamp):
        a, lo, hi = (pexpr(x) for x in e.args)
        return f"min(max({a}, {lo}), {hi})"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return f"({pexpr(e.base)} ** {int(e.exp)})"
    if isinstance(e, sympy.Max):
        return "max(" + ", ".join(pexpr(a) for a in e.args) + ")"
    if isinstance(e, sympy.Min):
        return "min(" + ", ".join(pexpr(a) for a in e.args) + ")"
    raise NotImplementedError(f"cannot print size expression {e} ({type(e).__name__})")


def ptuple(exprs) -> str:
    """A tuple of sizes as Python source; all-static tuples print as before (``(2, 3)``)."""
    exprs = [sympy.sympify(e) for e in exprs]
    if all(e.is_Integer for e in exprs):
        return repr(tuple(int(e) for e in exprs))
    return "(" + ", ".join(pexpr(e) for e in exprs) + ("," if len(exprs) == 1 else "") + ")"
