"""ShapeEnv: the symbols standing for input sizes, what is known about them, and the guards.

A symbol is a positive sympy integer ``s<k>`` with a *hint* (its value for the example inputs),
a value range (``[2, oo)`` for sizes: 0 and 1 are specialised, because ATen's broadcasting
and contiguity rules treat them specially) and the *sources* it was read from: strings such
as ``"arg0.size(0)"`` that name where its value comes from at run time.

Whenever a program branches on a symbolic value, ``evaluate(expr, hint)`` answers with the
hint. If value ranges and what is already known decide the answer for every size, nothing is
recorded; otherwise the answer becomes a *guard* (a sympy boolean that must hold for the
compiled artefact to be reused), and the guard refines what is known: ``s0 > 16`` narrows the
range of ``s0`` to ``[17, oo)``, ``Eq(s1, s0)`` replaces ``s1`` by ``s0`` everywhere, and
``Eq(s0, 8)`` (a specialisation) replaces ``s0`` by 8.

*Input checks* are the facts about inputs that are not branches: a size specialised to 0/1, a
dimension left static, a size that shares a symbol with another one (duck sizing), a stride
that follows from the sizes. ``evaluate_guards`` checks them together with the guards.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import traceback
from collections.abc import Mapping

import sympy
import torch

from .functions import FloorDiv
from .ranges import decide
from .sym_node import SymNode

log = logging.getLogger("danlu_primtorch.symbolic")

# Sizes are int64 in ATen: a symbol's default range ends below int64's maximum, so checks such
# as ``s0 < 2**63 - 1`` (overflow tests in kernels) are decided without a guard.
MAX_SIZE = 2**63 - 2


_MISSING = object()


class GuardCheckError(KeyError):
    """``evaluate_guards`` was not given the value of a source the guards read."""


@dataclasses.dataclass(frozen=True)
class Guard:
    """A boolean over size symbols that must hold; ``sources`` maps each symbol to where its
    value is read from at run time."""

    expr: sympy.Basic
    sources: dict

    def format(self) -> str:
        """The guard in terms of its sources: ``arg0.size(0) > 16``."""
        return _format(self.expr, self.sources)

    def __str__(self) -> str:
        return self.format()


@dataclasses.dataclass(frozen=True)
class InputCheck:
    """``source`` must equal ``expr`` (an int or an expression over symbols)."""

    source: str
    expr: sympy.Basic

    def format(self, sources: dict) -> str:
        return f"{self.source} == {_format(self.expr, sources)}"


def _format(expr, sources: dict) -> str:
    names = {s: sympy.Symbol(src) for s, src in sources.items() if s in expr.free_symbols}
    return str(expr.xreplace(names))


def _calls_on_stack() -> str:
    """The ops and functions being run on the stack, outermost first (the frames of
    dispatchers hold them in a local ``func`` or ``fn``): which call needed a concrete size."""
    import sys

    names, frame = [], sys._getframe(2)
    while frame is not None:
        for key in ("func", "fn"):
            f = frame.f_locals.get(key)
            if callable(f):
                name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or str(f)
                mod = getattr(f, "__module__", None)
                names.append(f"{mod}.{name}" if mod and "." not in str(name) else str(name))
                break
        frame = frame.f_back
    return " > ".join(reversed(list(dict.fromkeys(names)))) or "?"


class ShapeEnv:
    """Symbols for sizes, their ranges, hints and sources; guards recorded while tracing.

    ``duck_shape=True`` (the default): ``create_symbolic_size`` gives input sizes that have the
    same value the same symbol (and records that the sources must stay equal). That keeps
    programs such as ``x + y`` or square matrices guard-free and graphs smaller, at the price of
    a recompile if those sizes later differ. ``duck_shape=False`` gives every size its own
    symbol; equalities the program needs then become guards (``Eq(s1, s0)``).
    """

    def __init__(self, *, duck_shape: bool = True):
        self.duck_shape = duck_shape
        self.var_to_val: dict[sympy.Symbol, int] = {}
        self.var_to_range: dict[sympy.Symbol, tuple] = {}
        self.var_to_sources: dict[sympy.Symbol, list[str]] = {}
        self.replacements: dict[sympy.Symbol, sympy.Expr] = {}
        self.guards: list[Guard] = []
        self.input_checks: list[InputCheck] = []
        self._known: set = set()
        self._static_cache: dict = {}
        self._duck: dict[int, sympy.Symbol] = {}
        self._counter = itertools.count()

    # --- symbols -------------------------------------------------------------------------------
    def create_symbol(
        self, hint: int, source: str, *, min: int = 2, max: int = MAX_SIZE
    ) -> sympy.Symbol:
        """A fresh size symbol ``s<k>`` with value ``hint`` for the example inputs, read from
        ``source`` at run time, ranging over ``[min, max]``."""
        if not (min <= hint <= max):
            raise ValueError(f"hint {hint} for {source} outside the range [{min}, {max}]")
        sym = sympy.Symbol(f"s{next(self._counter)}", integer=True, positive=True)
        self.var_to_val[sym] = int(hint)
        self.var_to_range[sym] = (sympy.Integer(min), sympy.sympify(max))
        self.var_to_sources[sym] = [source]
        return sym

    def create_symbolic_size(self, value: int, source: str, *, duck: bool | None = None):
        """A ``torch.SymInt`` for a size of ``value`` read from ``source``; a plain int for 0 and
        1 (specialised: an input check records that the size must stay 0/1). With duck sizing,
        sizes of equal value share one symbol."""
        value = int(value)
        if value < 2:
            self.input_checks.append(InputCheck(source, sympy.Integer(value)))
            return value
        duck = self.duck_shape if duck is None else duck
        sym = self._duck.get(value) if duck else None
        if sym is not None:
            self.var_to_sources[sym].append(source)
            self.input_checks.append(InputCheck(source, sym))
        else:
            sym = self.create_symbol(value, source)
            if duck:
                self._duck[value] = sym
        return self.symint(sym)

    def symint(self, expr) -> torch.SymInt | int:
        """A ``torch.SymInt`` for an integer expression over this env's symbols (an int when the
        expression is a number)."""
        expr = self.simplify(sympy.sympify(expr))
        if expr.is_Integer:
            return int(expr)
        return torch.SymInt(SymNode(expr, self, int, self.hint_of(expr)))

    def add_input_check(self, source: str, expr) -> None:
        """Record that the run-time value at ``source`` must equal ``expr``."""
        self.input_checks.append(InputCheck(source, sympy.sympify(expr)))

    def source_of(self, sym: sympy.Symbol) -> str:
        return self.var_to_sources[sym][0]

    # --- knowledge -------------------------------------------------------------------------------
    def simplify(self, expr):
        """``expr`` with known equalities (replacements) applied."""
        if self.replacements and not expr.is_number:
            expr = expr.xreplace(self.replacements)
        return expr

    def hint_of(self, expr):
        """The value of ``expr`` for the example inputs (a Python int/float/bool)."""
        values = {s: sympy.Integer(v) for s, v in self.var_to_val.items()}
        v = self.simplify(sympy.sympify(expr)).xreplace(values)
        return _to_python(v)

    def static_value(self, expr):
        """True/False when ``expr`` has that value for every size allowed by what is known,
        None otherwise. Records nothing."""
        expr = self.simplify(sympy.sympify(expr))
        hit = self._static_cache.get(expr, _MISSING)
        if hit is not _MISSING:
            return hit
        if expr in self._known:
            result = True
        elif sympy.Not(expr) in self._known:
            result = False
        else:
            result = decide(expr, self.var_to_range)
        self._static_cache[expr] = result
        return result

    def evaluate(self, expr, hint):
        """The value of ``expr`` (its ``hint``), guarded: unless ``expr`` is decided statically,
        a guard that it keeps this value is recorded."""
        expr = self.simplify(sympy.sympify(expr))
        if expr.is_number or expr in (sympy.true, sympy.false):
            return _to_python(expr)
        if isinstance(hint, bool) or expr.is_Boolean or expr.is_Relational:
            static = self.static_value(expr)
            if static is not None:
                return static
            fact = expr if hint else sympy.Not(expr)
        else:
            fact = sympy.Eq(expr, hint)  # branching on an int/float value specialises it
        self._record(fact)
        return hint

    def _record(self, fact) -> None:
        fact = self.simplify(fact)
        if fact in (sympy.true, sympy.false) or fact in self._known:
            return
        sources = {s: self.source_of(s) for s in fact.free_symbols if s in self.var_to_sources}
        if log.isEnabledFor(logging.DEBUG) and isinstance(fact, sympy.Eq) and fact.rhs.is_Integer:
            # a size turned back into a constant: say where, it costs a recompile per value
            where = "".join(traceback.format_stack(limit=14)[:-1])
            log.debug(
                "specialised %s (%s) under %s at:\n%s", fact, sources, _calls_on_stack(), where
            )
        self.guards.append(Guard(fact, sources))
        self._static_cache.clear()  # what is known changes
        self._known.add(fact)
        self._refine(fact)

    def _refine(self, fact) -> None:
        if isinstance(fact, sympy.And):
            for a in fact.args:
                self._known.add(a)
                self._refine(a)
            return
        if not isinstance(fact, sympy.core.relational.Relational) or isinstance(fact, sympy.Ne):
            return
        diff = sympy.expand(fact.lhs - fact.rhs)
        syms = sorted(diff.free_symbols, key=lambda s: int(s.name[1:]))
        if isinstance(fact, sympy.Eq) and len(syms) == 2:
            a, b = syms
            coeffs = diff.as_coefficients_dict()
            if {abs(coeffs.get(a, 0)), abs(coeffs.get(b, 0))} == {1} and coeffs[a] == -coeffs[b]:
                if diff - coeffs[a] * a - coeffs[b] * b == 0:  # a == b: keep the older one
                    lo = max(self.var_to_range[a][0], self.var_to_range[b][0])
                    hi = min(self.var_to_range[a][1], self.var_to_range[b][1])
                    self.var_to_range[a] = (lo, hi)
                    self._replace(b, a)
            return
        if len(syms) != 1 or not diff.is_polynomial(syms[0]):
            return
        s = syms[0]
        poly = sympy.Poly(diff, s)
        if poly.degree() != 1:
            return
        a, b = poly.all_coeffs()
        bound = -b / a
        lo, hi = self.var_to_range[s]
        if isinstance(fact, sympy.Eq):
            if bound.is_Integer:
                self.var_to_range[s] = (bound, bound)
                self._replace(s, bound)
            return
        # Normalise to "a*s + b > 0" or ">= 0".
        strict = isinstance(fact, (sympy.StrictGreaterThan, sympy.StrictLessThan))
        if isinstance(fact, (sympy.StrictLessThan, sympy.LessThan)):
            a, bound = -a, bound  # a*s + b < 0  <=>  (-a)*s - b > 0, same root
        if a > 0:  # s > bound (or >=)
            new_lo = sympy.floor(bound) + 1 if strict else sympy.ceiling(bound)
            lo = builtins_max(lo, new_lo)
        else:  # s < bound (or <=)
            new_hi = sympy.ceiling(bound) - 1 if strict else sympy.floor(bound)
            hi = builtins_min(hi, new_hi)
        self.var_to_range[s] = (lo, hi)

    def _replace(self, sym, value) -> None:
        self.replacements = {k: v.xreplace({sym: value}) for k, v in self.replacements.items()}
        self.replacements[sym] = value

    # --- guards ------------------------------------------------------------------------------------
    def format_guards(self) -> str:
        """Every input check and guard, one per line, in terms of sources."""
        sources = {s: srcs[0] for s, srcs in self.var_to_sources.items()}
        lines = [self._format_range(s) for s in self.var_to_sources if s not in self.replacements]
        lines += [c.format(sources) for c in self.input_checks]
        lines += [g.format() for g in self.guards]
        return "\n".join(lines)

    def _format_range(self, sym) -> str:
        lo, hi = self.var_to_range[sym]
        upper = "" if hi >= MAX_SIZE else f" <= {hi}"
        return f"{lo} <= {self.source_of(sym)}{upper}"

    def bind(self, values: Mapping) -> dict:
        """Symbol bindings for new inputs: ``{source: int}`` -> ``{symbol: int}`` (each symbol's
        value is read from its first source). A mapping keyed by symbols is returned as is."""
        if values and all(isinstance(k, sympy.Symbol) for k in values):
            return {k: sympy.Integer(int(v)) for k, v in values.items()}
        binding = {}
        for sym, srcs in self.var_to_sources.items():
            if srcs[0] not in values:
                raise GuardCheckError(f"no value given for {srcs[0]} (symbol {sym})")
            binding[sym] = sympy.Integer(int(values[srcs[0]]))
        return binding

    def failed_guards(self, values: Mapping) -> list[str]:
        """The input checks and guards that do not hold for ``values`` (``{source: int}`` or
        ``{symbol: int}``), formatted; empty when all hold."""
        by_source = not all(isinstance(k, sympy.Symbol) for k in values) or not values
        binding = self.bind(values)
        sources = {s: srcs[0] for s, srcs in self.var_to_sources.items()}
        failed = []
        # Ranges are assumptions the trace relied on (a size >= 2 is never broadcast).
        for sym, value in binding.items():
            if sym in self.var_to_range and sym not in self.replacements:
                lo, hi = self.var_to_range[sym]
                if not lo <= value <= hi:
                    failed.append(self._format_range(sym))
        if by_source:
            for c in self.input_checks:
                if c.source not in values:
                    raise GuardCheckError(f"no value given for {c.source}")
                if int(values[c.source]) != _to_python(c.expr.xreplace(binding)):
                    failed.append(c.format(sources))
        for g in self.guards:
            if not _to_python(g.expr.xreplace(binding)):
                failed.append(g.format())
        return failed

    def guard_function(self):
        """The input checks, ranges and guards compiled to a Python function
        ``check(values_by_source) -> bool`` (sympy printed as Python code once: fast enough to
        run on every call, unlike ``evaluate_guards``). Reflects the guards recorded so far."""
        symbols = [s for s in self.var_to_sources]
        conds = []
        for sym in symbols:
            if sym not in self.replacements:
                lo, hi = self.var_to_range[sym]
                conds.append(sympy.And(sympy.Ge(sym, lo), sympy.Le(sym, hi)))
        src_syms = {}
        for c in self.input_checks:
            src_syms.setdefault(c.source, sympy.Symbol(f"_in{len(src_syms)}", integer=True))
            conds.append(sympy.Eq(src_syms[c.source], c.expr))
        conds += [g.expr for g in self.guards]
        args = symbols + list(src_syms.values())
        body = sympy.lambdify(
            args, conds, modules=[{"FloorDiv": lambda a, b: a // b}, "math"], docstring_limit=0
        )
        sources = [self.source_of(s) for s in symbols] + list(src_syms)

        def check(values: Mapping) -> bool:
            try:
                vals = [int(values[s]) for s in sources]
            except KeyError as e:
                raise GuardCheckError(f"no value given for {e.args[0]}") from None
            return all(bool(r) for r in body(*vals))

        check.sources = sources
        return check

    def evaluate_guards(self, values: Mapping) -> bool:
        """True when every input check and guard holds for ``values``."""
        return not self.failed_guards(values)

    def __repr__(self) -> str:
        return f"ShapeEnv({len(self.var_to_val)} symbols, {len(self.guards)} guards)"


def builtins_max(a, b):
    return a if a >= b else b


def builtins_min(a, b):
    return a if a <= b else b


def _to_python(v):
    if isinstance(v, (bool, int, float)):
        return v
    if v is sympy.true or v is True:
        return True
    if v is sympy.false or v is False:
        return False
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, sympy.Number):
        return float(v)
    if isinstance(v, FloorDiv):
        return _to_python(v.doit())
    try:
        return bool(v) if v.is_Boolean else v
    except TypeError:
        return v


def sym_expr(x):
    """The sympy expression of a ``torch.SymInt``/``SymFloat``/``SymBool`` (known equalities
    applied); Python numbers are returned as they are."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = x.node
        if not isinstance(node, SymNode):
            raise TypeError(f"{x!r} is not a danlu symbolic value (node {type(node).__name__})")
        return node.expr
    if isinstance(x, (int, float, bool)):
        return x
    raise TypeError(f"expected an int or a SymInt, got {type(x).__name__}")
