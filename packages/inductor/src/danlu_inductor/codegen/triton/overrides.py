"""The ``ops`` handler that writes Triton: each op becomes a typed, CSE'd temporary.

Values carry their torch dtype and the block dims they span ({"x"}, {"r"}, both, or none
for scalars), so loads and stores can pick masks of matching shape. Reduced floats
(fp16/bf16) are held in fp32 between loads and stores, as eager computes them.
"""

from __future__ import annotations

import torch

from danlu_inductor.codegen.comparisons import ComparisonOps
from danlu_inductor.codegen.triton.printer import TL_DTYPE, compute_dtype, constant, texpr


class TVar:
    def __init__(self, name: str, dtype: torch.dtype, dims=frozenset()):
        self.name = name
        self.dtype = dtype
        self.dims = frozenset(dims)

    def __str__(self):
        return self.name


def _promote(*vs):
    out = vs[0].dtype
    for v in vs[1:]:
        out = torch.promote_types(out, v.dtype)
    return out


def _dims(*vs):
    out = frozenset()
    for v in vs:
        out |= v.dims
    return out


# float math with a fast tl primitive for fp32; fp64 goes to libdevice through dm
TL_FLOAT32 = {
    "exp": "tl.exp({})",
    "exp2": "tl.exp2({})",
    "log": "tl.log({})",
    "log2": "tl.log2({})",
    "sqrt": "tl.sqrt_rn({})",
    "sin": "tl.sin({})",
    "cos": "tl.cos({})",
    "erf": "tl.erf({})",
}
DM_UNARY = (
    "tanh log1p expm1 lgamma asin acos atan sinh cosh tan asinh acosh atanh erfc log10 trunc"
).split()


class TritonOverrides(ComparisonOps):
    def __init__(self, kernel):
        self.k = kernel

    def _e(self, expr, dtype, dims):
        return self.k.emit(expr, dtype, dims)

    def _as(self, v: TVar, dtype) -> str:
        """``v`` spelled as a value of compute type ``compute_dtype(dtype)``."""
        cd = compute_dtype(dtype)
        if compute_dtype(v.dtype) == cd:
            return v.name
        if cd == torch.bool:
            return f"({v} != 0)"
        return f"{v}.to({TL_DTYPE[cd]})"

    # ------------------------------------------------------------------ memory & co
    def load(self, name, index):
        return self.k.load(name, index)

    def index_expr(self, expr, dtype):
        dims = self.k.dims_of(expr)
        if not dims and not getattr(expr, "free_symbols", None):
            return self._e(constant(int(expr), dtype), dtype, dims)
        if not dims:  # a symbolic size (a kernel argument): one value for every lane
            dims = frozenset("x")
            shape = self.k.shape(dims)
            block = f"({texpr(expr)} + tl.zeros({shape}, tl.int64))"
            return self._e(f"{block}.to({TL_DTYPE[compute_dtype(dtype)]})", dtype, dims)
        return self._e(f"({texpr(expr)}).to({TL_DTYPE[compute_dtype(dtype)]})", dtype, dims)

    def constant(self, value, dtype):
        return self._e(constant(value, dtype), dtype, frozenset())

    def indirect_indexing(self, v, size):
        return self.k.indirect(v, size)

    def to_dtype(self, v, dtype):
        if v.dtype == dtype:
            return v
        if dtype == torch.bool:
            return self._e(f"({v} != 0)", dtype, v.dims)
        if dtype in (torch.float16, torch.bfloat16):
            f = self._as(v, torch.float32)
            return self._e(f"{f}.to({TL_DTYPE[dtype]}).to(tl.float32)", dtype, v.dims)
        if compute_dtype(v.dtype) == compute_dtype(dtype):
            return TVar(v.name, dtype, v.dims)  # fp16/bf16 -> fp32: already held exactly
        return self._e(f"{v}.to({TL_DTYPE[dtype]})", dtype, v.dims)

    def where(self, c, a, b):
        dt = _promote(a, b)
        cond = self._as(c, torch.bool)
        return self._e(
            f"tl.where({cond}, {self._as(a, dt)}, {self._as(b, dt)})", dt, _dims(c, a, b)
        )

    # ------------------------------------------------------------------ arithmetic
    def _bin(self, fmt, a, b, out=None):
        dt = _promote(a, b)
        expr = fmt.format(self._as(a, dt), self._as(b, dt))
        return self._e(expr, out or dt, _dims(a, b))

    def add(self, a, b):
        if _promote(a, b) == torch.bool:
            return self._bin("({} | {})", a, b)
        return self._bin("({} + {})", a, b)

    def sub(self, a, b):
        return self._bin("({} - {})", a, b)

    def mul(self, a, b):
        if _promote(a, b) == torch.bool:
            return self._bin("({} & {})", a, b)
        return self._bin("({} * {})", a, b)

    def truediv(self, a, b):
        return self._bin("({} / {})", a, b)

    def floordiv(self, a, b):
        if _promote(a, b).is_floating_point:
            return self._bin("dm.floordiv_float({}, {})", a, b)
        return self._bin("dm.floordiv_int({}, {})", a, b)

    def truncdiv(self, a, b):
        if _promote(a, b).is_floating_point:
            return self._bin("dm.trunc({} / {})", a, b)
        return self._bin("dm.truncdiv_int({}, {})", a, b)

    def mod(self, a, b):
        if _promote(a, b).is_floating_point:
            return self._bin("dm.pymod_float({}, {})", a, b)
        return self._bin("dm.pymod_int({}, {})", a, b)

    def fmod(self, a, b):
        if _promote(a, b).is_floating_point:
            return self._bin("dm.fmod({}, {})", a, b)
        return self._bin("({0} - dm.truncdiv_int({0}, {1}) * {1})", a, b)

    def pow(self, a, b):
        dt = _promote(a, b)
        if dt == torch.bool:
            return self._bin("({} | ({} == 0))", a, b)
        if not dt.is_floating_point:
            return self._bin("dm.pow_int({}, {})", a, b)
        return self._bin("dm.pow({}, {})", a, b)

    def maximum(self, a, b):
        return self._bin("dm.maximum({}, {})", a, b)

    def minimum(self, a, b):
        return self._bin("dm.minimum({}, {})", a, b)

    def fmax(self, a, b):
        return self._bin("dm.fmax({}, {})", a, b)

    def fmin(self, a, b):
        return self._bin("dm.fmin({}, {})", a, b)

    def atan2(self, a, b):
        return self._bin("dm.atan2({}, {})", a, b)

    def hypot(self, a, b):
        return self._bin("dm.hypot({}, {})", a, b)

    def copysign(self, a, b):
        return self._bin("dm.copysign({}, {})", a, b)

    def nextafter(self, a, b):
        return self._bin("dm.nextafter({}, {})", a, b)

    def _logical(self, op, a, b):
        e = f"({self._as(a, torch.bool)} {op} {self._as(b, torch.bool)})"
        return self._e(e, torch.bool, _dims(a, b))

    def logical_and(self, a, b):
        return self._logical("&", a, b)

    def logical_or(self, a, b):
        return self._logical("|", a, b)

    def logical_xor(self, a, b):
        return self._logical("!=", a, b)

    def logical_not(self, a):
        return self._e(f"({self._as(a, torch.bool)} == 0)", torch.bool, a.dims)

    def bitwise_and(self, a, b):
        return self._bin("({} & {})", a, b)

    def bitwise_or(self, a, b):
        return self._bin("({} | {})", a, b)

    def bitwise_xor(self, a, b):
        return self._bin("({} ^ {})", a, b)

    def bitwise_not(self, a):
        if a.dtype == torch.bool:
            return self._e(f"({a} == 0)", torch.bool, a.dims)
        return self._e(f"(~{a})", a.dtype, a.dims)

    def lshift(self, a, b):
        return self._bin("({} << {})", a, b)

    def rshift(self, a, b):
        return self._bin("({} >> {})", a, b)

    # ------------------------------------------------------------------ unary
    def _un(self, fmt, a, out=None):
        return self._e(fmt.format(a.name), out or a.dtype, a.dims)

    def _float_math(self, name, a):
        if not a.dtype.is_floating_point:
            raise NotImplementedError(f"{name} of {a.dtype} in the Triton backend")
        if compute_dtype(a.dtype) == torch.float32 and name in TL_FLOAT32:
            return self._un(TL_FLOAT32[name], a)
        return self._un(f"dm.{name}({{}})", a)

    def neg(self, a):
        return self._un("(-{})", a)

    def abs(self, a):
        if a.dtype == torch.bool:
            return a
        return self._un("tl.abs({})", a)

    def sign(self, a):
        if a.dtype == torch.bool:
            return a
        t = TL_DTYPE[compute_dtype(a.dtype)]
        expr = f"(({a} > 0).to({t}) - ({a} < 0).to({t}))"
        if a.dtype.is_floating_point:
            expr = f"tl.where({a} != {a}, {a}, {expr})"
        return self._e(expr, a.dtype, a.dims)

    def relu(self, a):
        return self._un("dm.maximum({}, 0)", a)

    def sigmoid(self, a):
        return self._un("dm.sigmoid({})", a)

    def reciprocal(self, a):
        return self._un("(1.0 / {})", a)

    def rsqrt(self, a):
        s = self._float_math("sqrt", a)
        return self._un("(1.0 / {})", s)

    def floor(self, a):
        return a if not a.dtype.is_floating_point else self._un("tl.floor({})", a)

    def ceil(self, a):
        return a if not a.dtype.is_floating_point else self._un("tl.ceil({})", a)

    def round(self, a):
        return a if not a.dtype.is_floating_point else self._un("dm.nearbyint({})", a)

    def signbit(self, a):
        if a.dtype.is_floating_point:
            return self._un("dm.signbit({})", a, torch.bool)
        return self._un("({} < 0)", a, torch.bool)

    def isnan(self, a):
        if a.dtype.is_floating_point:
            return self._un("({0} != {0})", a, torch.bool)
        return self._e(constant(False, torch.bool), torch.bool, frozenset())

    def isinf(self, a):
        if a.dtype.is_floating_point:
            return self._un("dm.isinf({})", a, torch.bool)
        return self._e(constant(False, torch.bool), torch.bool, frozenset())

    def __getattr__(self, name):
        if name in TL_FLOAT32 or name in DM_UNARY:

            def op(a):
                return self._float_math(name, a)

            return op
        raise AttributeError(name)
