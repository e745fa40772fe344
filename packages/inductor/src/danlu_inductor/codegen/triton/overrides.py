"""The ``ops`` handler that writes Triton: the shared ``OpHandler`` with Triton spellings.

Values carry their torch dtype and the block dims they span ({"x"}, {"r"}, both, or none
for scalars), so loads and stores can pick masks of matching shape. Reduced floats
(fp16/bf16) are held in fp32 between loads and stores, as eager computes them.
"""

from __future__ import annotations

import torch

from danlu_inductor.codegen.op_handler import FLOAT_MATH, CSEVar, OpHandler
from danlu_inductor.codegen.triton.printer import (
    TL_DTYPE,
    compute_dtype,
    constant,
    texpr,
    tl_compute,
)


class TVar(CSEVar):
    def __init__(self, name: str, dtype: torch.dtype, dims=frozenset()):
        super().__init__(name, dtype)
        self.dims = frozenset(dims)


def _dims(*vs):
    out = frozenset()
    for v in vs:
        out |= v.dims
    return out


# float math: libdevice through dm (numpy under the interpreter), a fast tl primitive for
# fp32 where there is one; no integer forms (the lowerings compute those in floats)
_MATH = {name: {"float": f"dm.{name}({{}})"} for name in FLOAT_MATH}
for _name, _fast in dict(
    exp="tl.exp({})",
    exp2="tl.exp2({})",
    log="tl.log({})",
    log2="tl.log2({})",
    sqrt="tl.sqrt_rn({})",
    sin="tl.sin({})",
    cos="tl.cos({})",
    erf="tl.erf({})",
).items():
    _MATH[_name]["float32"] = _fast
_MATH.update(floor="tl.floor({})", ceil="tl.ceil({})", round="dm.nearbyint({})")
_SIGN = "(({0} > 0).to({T}) - ({0} < 0).to({T}))"

SPELLING = {
    **_MATH,
    # Python's floor semantics for // and % (tl's // and % truncate like C)
    "floordiv": {"float": "dm.floordiv_float({}, {})", "int": "dm.floordiv_int({}, {})"},
    "truncdiv": {"float": "dm.trunc({} / {})", "int": "dm.truncdiv_int({}, {})"},
    "mod": {"float": "dm.pymod_float({}, {})", "int": "dm.pymod_int({}, {})"},
    "fmod": {"float": "dm.fmod({}, {})", "int": "({0} - dm.truncdiv_int({0}, {1}) * {1})"},
    "pow": {"float": "dm.pow({}, {})", "int": "dm.pow_int({}, {})"},
    "maximum": "dm.maximum({}, {})",
    "minimum": "dm.minimum({}, {})",
    "fmax": "dm.fmax({}, {})",
    "fmin": "dm.fmin({}, {})",
    "atan2": "dm.atan2({}, {})",
    "hypot": "dm.hypot({}, {})",
    "copysign": "dm.copysign({}, {})",
    "nextafter": "dm.nextafter({}, {})",
    "lshift": "({} << {})",
    "rshift": "({} >> {})",
    "abs": "tl.abs({})",
    "sign": {"float": f"tl.where({{0}} != {{0}}, {{0}}, {_SIGN})", "int": _SIGN},  # NaN stays
    "relu": "dm.maximum({}, 0)",
    "sigmoid": "dm.sigmoid({})",
    "reciprocal": "(1.0 / {})",
    "rsqrt": {"float32": "(1.0 / tl.sqrt_rn({}))", "float": "(1.0 / dm.sqrt({}))"},
    "signbit": "dm.signbit({})",
    "isnan": "({0} != {0})",
    "isinf": "dm.isinf({})",
}


class TritonOverrides(OpHandler):
    TARGET = "Triton"
    SPELLING = SPELLING
    AND, OR, NOT = "&", "|", "({} == 0)"

    def emit(self, expr, dtype, *operands):
        return self.k.emit(expr, dtype, _dims(*operands))

    def held_type(self, dtype):
        return compute_dtype(dtype)

    def type_name(self, dtype):
        return tl_compute(dtype)

    def convert(self, expr, dtype):
        if compute_dtype(dtype) == torch.bool:
            return f"({expr} != 0)"
        return f"{expr}.to({tl_compute(dtype)})"

    def round_to(self, expr, dtype):
        return f"{expr}.to({TL_DTYPE[dtype]}).to(tl.float32)"

    def ternary(self, cond, a, b):
        return f"tl.where({cond}, {a}, {b})"

    def literal(self, value, dtype):
        return constant(value, dtype)

    def index_expr(self, expr, dtype):
        dims = self.k.dims_of(expr)
        if not dims and not getattr(expr, "free_symbols", None):
            return self.k.emit(constant(int(expr), dtype), dtype, dims)
        if not dims:  # a symbolic size (a kernel argument): one value for every lane
            dims = frozenset("x")
            shape = self.k.shape(dims)
            block = f"({texpr(expr)} + tl.zeros({shape}, tl.int64))"
            return self.k.emit(f"{block}.to({tl_compute(dtype)})", dtype, dims)
        return self.k.emit(f"({texpr(expr)}).to({tl_compute(dtype)})", dtype, dims)
