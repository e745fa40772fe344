"""The ``ops`` handler both code generators share: dtype promotion and how each op's
expression is built from its operands, over a few per-target primitives.

A target (C++, Triton) says how its language spells a conversion, a reduced-float rounding,
a ternary, a constant, the bool operators and, in ``SPELLING``, the ops that are a library
call or formula there (``maximum`` is ``dl_max<T>(a, b)`` in C++, ``dm.maximum(a, b)`` in
Triton). The kernel's ``emit`` names, CSEs and places each expression.
"""

from __future__ import annotations

import copy

import torch


class CSEVar:
    """A kernel temporary: its name and the torch dtype of the value it holds."""

    def __init__(self, name: str, dtype: torch.dtype):
        self.name = name
        self.dtype = dtype

    def __str__(self):
        return self.name

    def with_dtype(self, dtype):
        """The same temporary read as ``dtype`` (a reduced float already held in float32)."""
        v = copy.copy(self)
        v.dtype = dtype
        return v


def promote(*values) -> torch.dtype:
    out = values[0].dtype
    for v in values[1:]:
        out = torch.promote_types(out, v.dtype)
    return out


REDUCED_FLOATS = (torch.float16, torch.bfloat16)
ROUNDING = "floor ceil trunc round".split()  # the identity on integers
FLOAT_MATH = (
    "exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erf erfc lgamma"
).split() + ROUNDING
# the ops each target spells in its SPELLING; the others are built here
SPELLED_BINARY = (
    "floordiv truncdiv mod fmod pow maximum minimum fmax fmin atan2 hypot copysign nextafter "
    "lshift rshift"
).split()
SPELLED_UNARY = "abs sign relu sigmoid reciprocal rsqrt signbit isnan isinf".split() + FLOAT_MATH
SPELLED = frozenset(SPELLED_BINARY + SPELLED_UNARY)


class OpHandler:
    TARGET = ""  # for errors: "C++", "Triton"
    # op name -> a format of the operands ({} or {0}, {1}) and {T}, the name of the type they
    # are held in; or a dict of such formats by kind: "float32" (held in float32), "float",
    # "int" (bools too), looked up most specific first; no form for a dtype: NotImplementedError
    SPELLING: dict = {}
    AND = OR = ""  # bool and / or as infix operators
    NOT = ""  # bool negation, a format of one operand

    def __init__(self, kernel):
        self.k = kernel

    def __init_subclass__(cls, **kwargs):
        # a target that neither spells nor implements an op fails here, not mid-kernel
        super().__init_subclass__(**kwargs)
        missing = [
            n for n in sorted(SPELLED) if n not in cls.SPELLING and _inherited(cls, n, OpHandler)
        ]
        if missing:
            raise TypeError(f"{cls.__name__} spells no {', '.join(missing)}")

    # -------------------------------------------------- primitives (each target gives these)
    def emit(self, expr: str, dtype, *operands) -> CSEVar:
        """The kernel's temporary for ``expr``, a value of ``dtype`` computed from ``operands``."""
        raise NotImplementedError

    def index_expr(self, expr, dtype):
        raise NotImplementedError

    def held_type(self, dtype):
        """What a value of ``dtype`` is held in: values held alike need no conversion."""
        raise NotImplementedError

    def type_name(self, dtype) -> str:
        """The ``{T}`` of a spelling: the name of the type a ``dtype`` value is held in."""
        raise NotImplementedError

    def convert(self, expr: str, dtype) -> str:
        """``expr`` converted to the type ``dtype`` values are held in."""
        raise NotImplementedError

    def fix_type(self, expr: str, dtype) -> str:
        """An infix op's result as ``dtype``: C's integer promotion widens int8 + int8."""
        return expr

    def round_to(self, expr: str, dtype) -> str:
        """A float32 ``expr`` rounded to the reduced float ``dtype``, held in float32 again."""
        raise NotImplementedError

    def ternary(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError

    def literal(self, value, dtype) -> str:
        raise NotImplementedError

    # ---------------------------------------------------------------------------- helpers
    def _as(self, v: CSEVar, dtype) -> str:
        """``v`` spelled as a value held like ``dtype``."""
        if self.held_type(v.dtype) == self.held_type(dtype):
            return v.name
        return self.convert(v.name, dtype)

    def _spelling(self, name, dtype) -> str:
        form = self.SPELLING[name]
        if isinstance(form, str):
            return form
        if dtype.is_floating_point:
            f32 = self.held_type(dtype) == self.held_type(torch.float32)
            kinds = ("float32", "float") if f32 else ("float",)
        else:
            kinds = ("int",)
        for kind in kinds:
            if kind in form:
                return form[kind]
        raise NotImplementedError(f"{name} of {dtype} in the {self.TARGET} backend")

    def _bin(self, fmt, a, b, out=None):
        """Both operands held in their promoted dtype; the result ``out`` (default: that)."""
        dt = promote(a, b)
        expr = fmt.format(self._as(a, dt), self._as(b, dt), T=self.type_name(dt))
        out = out or dt
        return self.emit(self.fix_type(expr, out), out, a, b)

    def _infix(self, op, a, b, out=None):
        return self._bin(f"({{}} {op} {{}})", a, b, out)

    def _un(self, fmt, a, out=None):
        return self.emit(fmt.format(a.name, T=self.type_name(a.dtype)), out or a.dtype, a)

    def _spelled_un(self, name, a, out=None):
        return self._un(self._spelling(name, a.dtype), a, out)

    # ------------------------------------------------------------------------ memory & co
    def load(self, name, index):
        return self.k.load(name, index)

    def indirect_indexing(self, v, size, checked=True):
        return self.k.indirect(v, size, checked)

    def constant(self, value, dtype):
        return self.emit(self.literal(value, dtype), dtype)

    def to_dtype(self, v, dtype):
        if v.dtype == dtype:
            return v
        if dtype == torch.bool:
            return self.emit(f"({v} != 0)", dtype, v)
        if dtype in REDUCED_FLOATS:
            return self.emit(self.round_to(self._as(v, torch.float32), dtype), dtype, v)
        if self.held_type(v.dtype) == self.held_type(dtype):
            return v.with_dtype(dtype)  # fp16/bf16 -> fp32: already held exactly
        return self.emit(self.convert(v.name, dtype), dtype, v)

    def where(self, c, a, b):
        dt = promote(a, b)
        expr = self.ternary(self._as(c, torch.bool), self._as(a, dt), self._as(b, dt))
        return self.emit(expr, dt, c, a, b)

    # ------------------------------------------------------------------------- arithmetic
    def add(self, a, b):
        return self._infix(self.OR if promote(a, b) == torch.bool else "+", a, b)

    def sub(self, a, b):
        return self._infix("-", a, b)

    def mul(self, a, b):
        return self._infix(self.AND if promote(a, b) == torch.bool else "*", a, b)

    def truediv(self, a, b):
        return self._infix("/", a, b)

    def pow(self, a, b):
        if promote(a, b) == torch.bool:  # a ** b of bools: a or not b
            return self._bin(f"({{}} {self.OR} {self.NOT})", a, b)
        return self._bin(self._spelling("pow", promote(a, b)), a, b)

    def bitwise_and(self, a, b):
        return self._infix("&", a, b)

    def bitwise_or(self, a, b):
        return self._infix("|", a, b)

    def bitwise_xor(self, a, b):
        return self._infix("^", a, b)

    def bitwise_not(self, a):
        if a.dtype == torch.bool:
            return self.logical_not(a)
        return self.emit(self.fix_type(f"(~{a})", a.dtype), a.dtype, a)

    def _logical(self, op, a, b):
        expr = f"({self._as(a, torch.bool)} {op} {self._as(b, torch.bool)})"
        return self.emit(expr, torch.bool, a, b)

    def logical_and(self, a, b):
        return self._logical(self.AND, a, b)

    def logical_or(self, a, b):
        return self._logical(self.OR, a, b)

    def logical_xor(self, a, b):
        return self._logical("!=", a, b)

    def logical_not(self, a):
        return self.emit(self.NOT.format(self._as(a, torch.bool)), torch.bool, a)

    def eq(self, a, b):
        return self._infix("==", a, b, torch.bool)

    def ne(self, a, b):
        return self._infix("!=", a, b, torch.bool)

    def lt(self, a, b):
        return self._infix("<", a, b, torch.bool)

    def le(self, a, b):
        return self._infix("<=", a, b, torch.bool)

    def gt(self, a, b):
        return self._infix(">", a, b, torch.bool)

    def ge(self, a, b):
        return self._infix(">=", a, b, torch.bool)

    # ------------------------------------------------------------------------------ unary
    def neg(self, a):
        return self.emit(self.fix_type(f"(-{a})", a.dtype), a.dtype, a)

    def abs(self, a):
        return a if a.dtype == torch.bool else self._spelled_un("abs", a)

    def sign(self, a):
        return a if a.dtype == torch.bool else self._spelled_un("sign", a)

    def signbit(self, a):
        if a.dtype.is_floating_point:
            return self._spelled_un("signbit", a, torch.bool)
        return self._un("({} < 0)", a, torch.bool)

    def isnan(self, a):
        if a.dtype.is_floating_point:
            return self._spelled_un("isnan", a, torch.bool)
        return self.constant(False, torch.bool)

    def isinf(self, a):
        if a.dtype.is_floating_point:
            return self._spelled_un("isinf", a, torch.bool)
        return self.constant(False, torch.bool)


def _inherited(cls, name, base) -> bool:
    return getattr(cls, name, None) is getattr(base, name, None)


def _spelled_binary(name):
    def op(self, a, b):
        return self._bin(self._spelling(name, promote(a, b)), a, b)

    return op


def _spelled_unary(name):
    def op(self, a):
        if name in ROUNDING and not a.dtype.is_floating_point:
            return a
        return self._spelled_un(name, a)

    return op


for _name in SPELLED_BINARY + SPELLED_UNARY:
    if not hasattr(OpHandler, _name):
        _op = _spelled_binary(_name) if _name in SPELLED_BINARY else _spelled_unary(_name)
        _op.__name__, _op.__qualname__ = _name, f"OpHandler.{_name}"
        setattr(OpHandler, _name, _op)
