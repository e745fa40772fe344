"""The ``ops`` handler that writes C++: the shared ``OpHandler`` with C++ spellings. Each op
becomes a typed, CSE'd temporary; reduced floats are held in ``float``."""

from __future__ import annotations

import torch

from danlu_inductor.codegen.cpp.printer import cexpr, constant, value_ctype
from danlu_inductor.codegen.op_handler import FLOAT_MATH, OpHandler, promote

# float math through <cmath>, except the vectorizable FMA polynomials of the prelude
_MATH = {name: f"std::{name}({{}})" for name in FLOAT_MATH}
_MATH.update(exp="dl_exp({})", tanh="dl_tanh({})", erf="dl_erf({})", round="std::nearbyint({})")

# integer and float forms in one template each (prelude.py): no dispatch on the dtype here
SPELLING = {
    **_MATH,
    "floordiv": "dl_floordiv<{T}>({}, {})",
    "truncdiv": "dl_truncdiv<{T}>({}, {})",
    "mod": "dl_mod<{T}>({}, {})",
    "fmod": "dl_fmod<{T}>({}, {})",
    "pow": "dl_pow<{T}>({}, {})",
    "maximum": "dl_max<{T}>({}, {})",
    "minimum": "dl_min<{T}>({}, {})",
    "fmax": "dl_fmax<{T}>({}, {})",
    "fmin": "dl_fmin<{T}>({}, {})",
    "atan2": "std::atan2({}, {})",
    "hypot": "std::hypot({}, {})",
    "copysign": "std::copysign({}, {})",
    "nextafter": "std::nextafter({}, {})",
    "lshift": "dl_lshift<{T}>({}, {})",  # shifts past the width: 0 / the sign, like eager
    "rshift": "dl_rshift<{T}>({}, {})",
    "abs": "dl_abs<{T}>({})",
    "sign": "dl_sign<{T}>({})",
    "relu": "dl_max<{T}>({}, {T}(0))",
    "sigmoid": "dl_sigmoid<{T}>({})",
    "reciprocal": "({T}(1) / {})",
    "rsqrt": "({T}(1) / std::sqrt({}))",
    "signbit": "std::signbit({})",
    "isnan": "std::isnan({})",
    "isinf": "std::isinf({})",
}


class CppOverrides(OpHandler):
    """Implements the ops set on top of a kernel's ``emit(expr, dtype) -> CSEVar``."""

    TARGET = "C++"
    SPELLING = SPELLING
    AND, OR, NOT = "&&", "||", "(!{})"

    def emit(self, expr, dtype, *operands):
        return self.k.emit(expr, dtype)

    def held_type(self, dtype):
        return value_ctype(dtype)

    def type_name(self, dtype):
        return value_ctype(dtype)

    def convert(self, expr, dtype):
        return f"static_cast<{value_ctype(dtype)}>({expr})"

    def fix_type(self, expr, dtype):
        return expr if dtype == torch.bool else self.convert(expr, dtype)

    def round_to(self, expr, dtype):
        if dtype == torch.bfloat16:
            return f"dl_from_bf16(dl_to_bf16({expr}))"
        return f"static_cast<float>(static_cast<dl_half>({expr}))"

    def ternary(self, cond, a, b):
        return f"({cond} ? {a} : {b})"

    def literal(self, value, dtype):
        return constant(value, dtype)

    def index_expr(self, expr, dtype):
        return self.emit(self.convert(cexpr(expr), dtype), dtype)

    def truediv(self, a, b):
        dt = promote(a, b)
        if dt in (torch.float32, torch.float64) and self.k.divides_by_row_value(a, b):
            # x / (row reduction) inside a loop over the row (softmax, normalize by sum):
            # multiply by the reciprocal, computed once per row, like eager's softmax; a
            # division stays for divisors whose reciprocal would overflow or lose bits (the
            # compiler unswitches the loop on this per-row flag)
            t = value_ctype(dt)
            av, bv = self._as(a, dt), self._as(b, dt)
            rb = self.emit(f"({t}(1) / {bv})", dt)
            ok = self.emit(f"dl_recip_ok({bv})", torch.bool)
            return self.emit(
                f"({ok} ? static_cast<{t}>({av} * {rb}) : static_cast<{t}>({av} / {bv}))", dt
            )
        return super().truediv(a, b)
