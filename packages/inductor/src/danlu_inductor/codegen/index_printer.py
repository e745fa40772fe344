"""The IR's integer index expressions as source text, one walk for every target language.

Index math has non-negative operands (loop indices, clamped gather indices, sizes), so
``FloorDiv`` and ``IMod`` print as each language's plain integer division and modulo. A
target (C++, Triton, the Python wrapper) only says how it spells the forms that differ.
"""

from __future__ import annotations

import sympy

from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod


class IndexPrinter:
    what = "index expression"  # for the error on an expression the IR never makes
    div = "//"

    def integer(self, v: int) -> str:
        return str(v)

    def clamp(self, a: str, lo: str, hi: str) -> str:
        raise NotImplementedError

    def power(self, base: str, n: int) -> str:
        return "(" + " * ".join([base] * n) + ")"

    def extremum(self, name: str, args: list[str]) -> str:  # name: "max" or "min"
        raise NotImplementedError

    def __call__(self, e) -> str:
        e = sympy.sympify(e)
        if e.is_Integer:
            return self.integer(int(e))
        if e.is_Symbol:
            return e.name
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + " * ".join(self(a) for a in e.args) + ")"
        if isinstance(e, FloorDiv):
            return f"({self(e.args[0])} {self.div} {self(e.args[1])})"
        if isinstance(e, IMod):
            return f"({self(e.args[0])} % {self(e.args[1])})"
        if isinstance(e, Clamp):
            return self.clamp(*(self(x) for x in e.args))
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            return self.power(self(e.base), int(e.exp))
        if isinstance(e, (sympy.Max, sympy.Min)):
            name = "max" if isinstance(e, sympy.Max) else "min"
            return self.extremum(name, [self(a) for a in e.args])
        raise NotImplementedError(f"cannot print {self.what} {e} ({type(e).__name__})")
