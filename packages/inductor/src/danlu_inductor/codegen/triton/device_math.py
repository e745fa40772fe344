"""Device helpers that generated kernels call as ``dm.<name>``.

Combine functions for reductions (NaN-propagating max/min like eager, first-index argmax,
Welford merge) are ``@triton.jit`` functions and run the same compiled or interpreted.
Math without a ``tl`` primitive goes to libdevice on the GPU. The Triton interpreter
(``TRITON_INTERPRET=1``, used by the CPU tests) cannot run libdevice, so there those
functions evaluate with numpy on the interpreter's arrays instead: the interpreted results
check the kernel's structure and indexing, and AOT compilation for sm_90 checks that the
libdevice spellings lower.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl
from triton.language.extra import libdevice

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

# ------------------------------------------------------------------ elementwise min/max


@triton.jit
def maximum(a, b):
    # eager's max propagates NaN (a != a only for NaN; always False for integers)
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def fmax(a, b):
    return tl.where((a > b) | (b != b), a, b)


@triton.jit
def fmin(a, b):
    return tl.where((a < b) | (b != b), a, b)


# ---------------------------------------------------------------- reduction combines


@triton.jit
def prod_combine(a, b):
    return a * b


@triton.jit
def argmax_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    better = (v1 > v2) | (nan1 & (~nan2))
    tie = (v1 == v2) | (nan1 & nan2)
    pick1 = better | (tie & (i1 < i2))
    return tl.where(pick1, v1, v2), tl.where(pick1, i1, i2)


@triton.jit
def argmin_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    better = (v1 < v2) | (nan1 & (~nan2))
    tie = (v1 == v2) | (nan1 & nan2)
    pick1 = better | (tie & (i1 < i2))
    return tl.where(pick1, v1, v2), tl.where(pick1, i1, i2)


@triton.jit
def welford_combine(mean1, m2_1, w1, mean2, m2_2, w2):
    w = w1 + w2
    frac = tl.where(w == 0.0, 0.0, w2 / tl.where(w == 0.0, 1.0, w))
    delta = mean2 - mean1
    return mean1 + delta * frac, m2_1 + m2_2 + delta * delta * w1 * frac, w


# ----------------------------------------------------- integer division with floor rules


@triton.jit
def floordiv_int(a, b):
    # correct whether the target's `//` truncates (GPU) or floors
    q = a // b
    r = a - q * b
    return q - ((r != 0) & ((r < 0) != (b < 0))).to(q.dtype)


@triton.jit
def pymod_int(a, b):
    r = a - floordiv_int(a, b) * b
    return r


@triton.jit
def truncdiv_int(a, b):
    q = floordiv_int(a, b)
    r = a - q * b
    return q + ((r != 0) & ((a < 0) != (b < 0))).to(q.dtype)


@triton.jit
def pow_int(a, b):
    # square and multiply over the exponent's bits; negative exponents as eager: 0 unless
    # the base is 1 or -1
    result = tl.full(a.shape, 1, a.dtype) + a * 0
    base = a
    e = tl.where(b < 0, 0, b)
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    odd = (b & 1) != 0
    neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where(odd, -1, 1), 0)).to(a.dtype)
    return tl.where(b < 0, neg, result)


@triton.jit
def floordiv_float(a, b):
    return tl.floor(a / b)


@triton.jit
def pymod_float(a, b):
    r = fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def signbit(x):
    return (x < 0) | ((x == 0) & ((1.0 / x) < 0))


@triton.jit
def isinf(x):
    return (x == float("inf")) | (x == float("-inf"))


# ------------------------------------------------------------------- libdevice math

_UNARY = (
    "exp exp2 log log2 sqrt sin cos erf "
    "tanh log1p expm1 lgamma asin acos atan sinh cosh tan asinh acosh atanh erfc log10 "
    "trunc nearbyint"
).split()
_BINARY = "atan2 hypot copysign nextafter pow fmod".split()

if INTERPRET:
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    _NP = {
        "exp": np.exp,
        "exp2": np.exp2,
        "log": np.log,
        "log2": np.log2,
        "sqrt": np.sqrt,
        "sin": np.sin,
        "cos": np.cos,
        "tanh": np.tanh,
        "log1p": np.log1p,
        "expm1": np.expm1,
        "asin": np.arcsin,
        "acos": np.arccos,
        "atan": np.arctan,
        "sinh": np.sinh,
        "cosh": np.cosh,
        "tan": np.tan,
        "asinh": np.arcsinh,
        "acosh": np.arccosh,
        "atanh": np.arctanh,
        "log10": np.log10,
        "trunc": np.trunc,
        "nearbyint": np.rint,
        "atan2": np.arctan2,
        "hypot": np.hypot,
        "copysign": np.copysign,
        "nextafter": np.nextafter,
        "pow": np.power,
        "fmod": np.fmod,
    }

    def _lgamma(d):
        import math

        def one(v):
            try:
                return math.lgamma(v)
            except ValueError:  # poles: 0, -1, -2, ...
                return math.inf

        return np.vectorize(one, otypes=[d.dtype])(d)

    def _erfc(d):
        import math

        return np.vectorize(math.erfc, otypes=[d.dtype])(d)

    def _erf(d):
        import math

        return np.vectorize(math.erf, otypes=[d.dtype])(d)

    _NP["erf"] = _erf
    _NP["lgamma"] = _lgamma
    _NP["erfc"] = _erfc

    def _np_op(fn):
        def op(*args):
            if len(args) == 2:
                args = tl.broadcast(*args)
            x = args[0]
            with np.errstate(all="ignore"):
                d = fn(*(a.handle.data for a in args)).astype(x.handle.data.dtype)
            return tl.core.tensor(TensorHandle(d, x.handle.dtype), x.type)

        return op

    for _name in _UNARY + _BINARY:
        globals()[_name] = _np_op(_NP[_name])
else:

    @triton.jit
    def exp(x):
        return libdevice.exp(x)

    @triton.jit
    def exp2(x):
        return libdevice.exp2(x)

    @triton.jit
    def log(x):
        return libdevice.log(x)

    @triton.jit
    def log2(x):
        return libdevice.log2(x)

    @triton.jit
    def sqrt(x):
        return libdevice.sqrt(x)

    @triton.jit
    def sin(x):
        return libdevice.sin(x)

    @triton.jit
    def cos(x):
        return libdevice.cos(x)

    @triton.jit
    def erf(x):
        return libdevice.erf(x)

    @triton.jit
    def tanh(x):
        return libdevice.tanh(x)

    @triton.jit
    def log1p(x):
        return libdevice.log1p(x)

    @triton.jit
    def expm1(x):
        return libdevice.expm1(x)

    @triton.jit
    def lgamma(x):
        return libdevice.lgamma(x)

    @triton.jit
    def asin(x):
        return libdevice.asin(x)

    @triton.jit
    def acos(x):
        return libdevice.acos(x)

    @triton.jit
    def atan(x):
        return libdevice.atan(x)

    @triton.jit
    def sinh(x):
        return libdevice.sinh(x)

    @triton.jit
    def cosh(x):
        return libdevice.cosh(x)

    @triton.jit
    def tan(x):
        return libdevice.tan(x)

    @triton.jit
    def asinh(x):
        return libdevice.asinh(x)

    @triton.jit
    def acosh(x):
        return libdevice.acosh(x)

    @triton.jit
    def atanh(x):
        return libdevice.atanh(x)

    @triton.jit
    def erfc(x):
        return libdevice.erfc(x)

    @triton.jit
    def log10(x):
        return libdevice.log10(x)

    @triton.jit
    def trunc(x):
        return libdevice.trunc(x)

    @triton.jit
    def nearbyint(x):
        return libdevice.nearbyint(x)

    @triton.jit
    def atan2(a, b):
        return libdevice.atan2(a, b)

    @triton.jit
    def hypot(a, b):
        return libdevice.hypot(a, b)

    @triton.jit
    def copysign(a, b):
        return libdevice.copysign(a, b)

    @triton.jit
    def nextafter(a, b):
        return libdevice.nextafter(a, b)

    @triton.jit
    def pow(a, b):
        return libdevice.pow(a, b)

    @triton.jit
    def fmod(a, b):
        return libdevice.fmod(a, b)
