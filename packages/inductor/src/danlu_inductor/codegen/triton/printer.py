"""Triton spellings: dtypes, index expressions, constants."""

from __future__ import annotations

import math

import sympy
import torch

from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod

# pointer element types in a kernel signature (what ``triton.compile`` calls them)
SIGNATURE_TYPE = {
    torch.float32: "*fp32",
    torch.float64: "*fp64",
    torch.float16: "*fp16",
    torch.bfloat16: "*bf16",
    torch.int64: "*i64",
    torch.int32: "*i32",
    torch.int16: "*i16",
    torch.int8: "*i8",
    torch.uint8: "*u8",
    torch.bool: "*i1",
}

TL_DTYPE = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.int16: "tl.int16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """What a value of ``dtype`` is held in between loads and stores (reduced floats in fp32,
    like eager's CPU and CUDA kernels compute them)."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return dtype


def tl_compute(dtype: torch.dtype) -> str:
    return TL_DTYPE[compute_dtype(dtype)]


def texpr(e) -> str:
    """An integer index expression as Triton source.

    FloorDiv and IMod in index math have non-negative operands (the IR's contract: loop
    indices and clamped gather indices are >= 0), where C-style and floor division agree,
    so they print as ``//`` and ``%``. Value-level floordiv/mod (possibly negative) go through
    ``dm.floordiv``/``dm.pymod`` instead.
    """
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(texpr(a) for a in e.args) + ")"
    if isinstance(e, sympy.Mul):
        return "(" + " * ".join(texpr(a) for a in e.args) + ")"
    if isinstance(e, FloorDiv):
        return f"({texpr(e.args[0])} // {texpr(e.args[1])})"
    if isinstance(e, IMod):
        return f"({texpr(e.args[0])} % {texpr(e.args[1])})"
    if isinstance(e, Clamp):
        a, lo, hi = (texpr(x) for x in e.args)
        return f"tl.minimum(tl.maximum({a}, {lo}), {hi})"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + " * ".join([texpr(e.base)] * int(e.exp)) + ")"
    if isinstance(e, (sympy.Max, sympy.Min)):
        fn = "tl.maximum" if isinstance(e, sympy.Max) else "tl.minimum"
        args = [texpr(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"{fn}({out}, {a})"
        return out
    raise NotImplementedError(f"cannot print index expression {e} ({type(e).__name__})")


def literal(value, dtype: torch.dtype) -> str:
    """A Python literal for a constant of ``dtype`` (reduced floats rounded to their type)."""
    if dtype == torch.bool:
        return "True" if value else "False"
    if dtype.is_floating_point:
        v = float(value)
        if dtype in (torch.float16, torch.bfloat16):
            v = float(torch.tensor(v, dtype=dtype).float())
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("-inf")' if v < 0 else 'float("inf")'
        return repr(v)
    return str(int(value))


def constant(value, dtype: torch.dtype) -> str:
    return f"tl.full([], {literal(value, dtype)}, {tl_compute(dtype)})"
