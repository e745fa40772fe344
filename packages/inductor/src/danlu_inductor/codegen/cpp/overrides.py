"""The ``ops`` handler that writes C++: each op becomes a typed, CSE'd temporary."""

from __future__ import annotations

import sympy
import torch

from danlu_inductor.codegen.comparisons import ComparisonOps
from danlu_inductor.codegen.cpp.printer import STORAGE_CTYPE, cexpr, constant, value_ctype


class CSEVar:
    def __init__(self, name: str, dtype: torch.dtype):
        self.name = name
        self.dtype = dtype

    def __str__(self):
        return self.name


def _promote(*vs):
    out = vs[0].dtype
    for v in vs[1:]:
        out = torch.promote_types(out, v.dtype)
    return out


UNARY_FLOAT = {
    "exp": "dl_exp({})",
    "exp2": "std::exp2({})",
    "expm1": "std::expm1({})",
    "log": "std::log({})",
    "log2": "std::log2({})",
    "log10": "std::log10({})",
    "log1p": "std::log1p({})",
    "sqrt": "std::sqrt({})",
    "sin": "std::sin({})",
    "cos": "std::cos({})",
    "tan": "std::tan({})",
    "asin": "std::asin({})",
    "acos": "std::acos({})",
    "atan": "std::atan({})",
    "sinh": "std::sinh({})",
    "cosh": "std::cosh({})",
    "tanh": "dl_tanh({})",
    "asinh": "std::asinh({})",
    "acosh": "std::acosh({})",
    "atanh": "std::atanh({})",
    "erf": "dl_erf({})",
    "erfc": "std::erfc({})",
    "lgamma": "std::lgamma({})",
    "floor": "std::floor({})",
    "ceil": "std::ceil({})",
    "trunc": "std::trunc({})",
    "round": "std::nearbyint({})",
}


class CppOverrides(ComparisonOps):
    """Implements the ops set on top of a kernel's ``emit(expr, dtype) -> CSEVar``."""

    def __init__(self, kernel):
        self.k = kernel

    def _e(self, expr, dtype):
        return self.k.emit(expr, dtype)

    def _cast(self, v, dtype):
        """``v`` spelled as a value of ``dtype`` (no rounding for reduced floats: the caller
        only uses this where values already are representable)."""
        if v.dtype == dtype or value_ctype(v.dtype) == value_ctype(dtype):
            return v.name
        return f"static_cast<{value_ctype(dtype)}>({v.name})"

    # --------------------------------------------------------------------- memory & co
    def load(self, name, index):
        return self.k.load(name, index)

    def index_expr(self, expr, dtype):
        return self._e(f"static_cast<{value_ctype(dtype)}>({cexpr(expr)})", dtype)

    def constant(self, value, dtype):
        return self._e(constant(value, dtype), dtype)

    def indirect_indexing(self, v, size):
        return self.k.indirect(v, size)

    def to_dtype(self, v, dtype):
        if v.dtype == dtype:
            return v
        src = v.dtype
        if dtype == torch.bool:
            return self._e(f"({v.name} != 0)", dtype)
        if dtype == torch.bfloat16:
            f = self._cast(v, torch.float32)
            return self._e(f"dl_from_bf16(dl_to_bf16({f}))", dtype)
        if dtype == torch.float16:
            f = self._cast(v, torch.float32)
            return self._e(f"static_cast<float>(static_cast<dl_half>({f}))", dtype)
        if src in (torch.float16, torch.bfloat16) and value_ctype(dtype) == "float":
            return CSEVar(v.name, dtype)  # already held exactly in a float
        return self._e(f"static_cast<{value_ctype(dtype)}>({v.name})", dtype)

    def where(self, c, a, b):
        dt = _promote(a, b)
        return self._e(f"({c.name} ? {self._cast(a, dt)} : {self._cast(b, dt)})", dt)

    # ----------------------------------------------------------------------- arithmetic
    def _bin(self, fmt, a, b, out=None):
        dt = _promote(a, b)
        expr = fmt.format(self._cast(a, dt), self._cast(b, dt), T=value_ctype(dt))
        out = out or dt
        if out != torch.bool and value_ctype(out) != "bool":
            expr = f"static_cast<{value_ctype(out)}>({expr})"
        return self._e(expr, out)

    def add(self, a, b):
        if _promote(a, b) == torch.bool:
            return self._bin("({} || {})", a, b)
        return self._bin("({} + {})", a, b)

    def sub(self, a, b):
        return self._bin("({} - {})", a, b)

    def mul(self, a, b):
        if _promote(a, b) == torch.bool:
            return self._bin("({} && {})", a, b)
        return self._bin("({} * {})", a, b)

    def truediv(self, a, b):
        dt = _promote(a, b)
        if dt in (torch.float32, torch.float64) and self.k.divides_by_row_value(a, b):
            # x / (row reduction) inside a loop over the row (softmax, normalize by sum):
            # multiply by the reciprocal, computed once per row, like eager's softmax; a
            # division stays for divisors whose reciprocal would overflow or lose bits (the
            # compiler unswitches the loop on this per-row flag)
            t = value_ctype(dt)
            av, bv = self._cast(a, dt), self._cast(b, dt)
            rb = self._e(f"({t}(1) / {bv})", dt)
            ok = self._e(f"dl_recip_ok({bv})", torch.bool)
            return self._e(
                f"({ok} ? static_cast<{t}>({av} * {rb}) : static_cast<{t}>({av} / {bv}))", dt
            )
        return self._bin("({} / {})", a, b)

    def floordiv(self, a, b):
        return self._bin("dl_floordiv<{T}>({}, {})", a, b)

    def truncdiv(self, a, b):
        return self._bin("dl_truncdiv<{T}>({}, {})", a, b)

    def mod(self, a, b):
        return self._bin("dl_mod<{T}>({}, {})", a, b)

    def fmod(self, a, b):
        return self._bin("dl_fmod<{T}>({}, {})", a, b)

    def pow(self, a, b):
        if _promote(a, b) == torch.bool:
            return self._bin("({} || !{})", a, b)
        return self._bin("dl_pow<{T}>({}, {})", a, b)

    def maximum(self, a, b):
        return self._bin("dl_max<{T}>({}, {})", a, b)

    def minimum(self, a, b):
        return self._bin("dl_min<{T}>({}, {})", a, b)

    def fmax(self, a, b):
        return self._bin("dl_fmax<{T}>({}, {})", a, b)

    def fmin(self, a, b):
        return self._bin("dl_fmin<{T}>({}, {})", a, b)

    def atan2(self, a, b):
        return self._bin("std::atan2({}, {})", a, b)

    def hypot(self, a, b):
        return self._bin("std::hypot({}, {})", a, b)

    def copysign(self, a, b):
        return self._bin("std::copysign({}, {})", a, b)

    def nextafter(self, a, b):
        return self._bin("std::nextafter({}, {})", a, b)

    def logical_and(self, a, b):
        return self._e(f"(static_cast<bool>({a}) && static_cast<bool>({b}))", torch.bool)

    def logical_or(self, a, b):
        return self._e(f"(static_cast<bool>({a}) || static_cast<bool>({b}))", torch.bool)

    def logical_xor(self, a, b):
        return self._e(f"(static_cast<bool>({a}) != static_cast<bool>({b}))", torch.bool)

    def logical_not(self, a):
        return self._e(f"(!static_cast<bool>({a}))", torch.bool)

    def bitwise_and(self, a, b):
        return self._bin("({} & {})", a, b)

    def bitwise_or(self, a, b):
        return self._bin("({} | {})", a, b)

    def bitwise_xor(self, a, b):
        return self._bin("({} ^ {})", a, b)

    def bitwise_not(self, a):
        if a.dtype == torch.bool:
            return self._e(f"(!{a})", torch.bool)
        return self._e(f"static_cast<{value_ctype(a.dtype)}>(~{a})", a.dtype)

    def lshift(self, a, b):
        return self._bin("dl_lshift<{T}>({}, {})", a, b)

    def rshift(self, a, b):
        return self._bin("dl_rshift<{T}>({}, {})", a, b)

    # ---------------------------------------------------------------------------- unary
    def _un(self, fmt, a, out=None):
        out = out or a.dtype
        return self._e(fmt.format(a.name, T=value_ctype(a.dtype)), out)

    def neg(self, a):
        return self._un("static_cast<{T}>(-{})", a)

    def abs(self, a):
        return self._un("dl_abs<{T}>({})", a)

    def sign(self, a):
        return self._un("dl_sign<{T}>({})", a)

    def relu(self, a):
        return self._un("dl_max<{T}>({}, {T}(0))", a)

    def sigmoid(self, a):
        return self._un("dl_sigmoid<{T}>({})", a)

    def reciprocal(self, a):
        return self._un("({T}(1) / {})", a)

    def rsqrt(self, a):
        return self._un("({T}(1) / std::sqrt({}))", a)

    def signbit(self, a):
        if a.dtype.is_floating_point:
            return self._un("std::signbit({})", a, torch.bool)
        return self._un("({} < 0)", a, torch.bool)

    def isnan(self, a):
        if a.dtype.is_floating_point:
            return self._un("std::isnan({})", a, torch.bool)
        return self._e("false", torch.bool)

    def isinf(self, a):
        if a.dtype.is_floating_point:
            return self._un("std::isinf({})", a, torch.bool)
        return self._e("false", torch.bool)

    def __getattr__(self, name):
        if name in UNARY_FLOAT:
            fmt = UNARY_FLOAT[name]

            def op(a):
                return self._un(fmt, a)

            return op
        raise AttributeError(name)


def storage_ctype(dtype):
    return STORAGE_CTYPE[dtype]


def is_symbol(x):
    return isinstance(x, sympy.Symbol)
