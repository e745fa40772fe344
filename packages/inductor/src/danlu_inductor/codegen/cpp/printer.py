"""C++ spellings: dtypes, index expressions, constants."""

from __future__ import annotations

import math

import torch

from danlu_inductor.codegen.index_printer import IndexPrinter

# storage types (what pointers point to)
STORAGE_CTYPE = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "dl_half",
    torch.bfloat16: "dl_bf16",
    torch.int64: "int64_t",
    torch.int32: "int32_t",
    torch.int16: "int16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
}


def value_ctype(dtype: torch.dtype) -> str:
    """Type of a C++ temporary holding a value of ``dtype`` (reduced floats live in float)."""
    if dtype in (torch.float16, torch.bfloat16):
        return "float"
    return STORAGE_CTYPE[dtype]


class _CppIndex(IndexPrinter):
    """All loop variables are non-negative int64."""

    div = "/"

    def integer(self, v):
        return f"{v}LL" if abs(v) > 2**31 - 1 else str(v)

    def clamp(self, a, lo, hi):
        return f"std::min<int64_t>(std::max<int64_t>({a}, {lo}), {hi})"

    def extremum(self, name, args):
        return f"std::{name}<int64_t>(" + ", ".join(args) + ")"


cexpr = _CppIndex()  # an integer index expression as C++


def constant(value, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        ct = value_ctype(dtype)
        v = float(value)
        if dtype in (torch.float16, torch.bfloat16):
            v = float(torch.tensor(v, dtype=dtype).float())
        if math.isnan(v):
            return f"std::numeric_limits<{ct}>::quiet_NaN()"
        if math.isinf(v):
            sign = "-" if v < 0 else ""
            return f"{sign}std::numeric_limits<{ct}>::infinity()"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}f" if ct == "float" else text
    v = int(value)
    ct = STORAGE_CTYPE[dtype]
    if dtype == torch.int64 and v == -(2**63):
        return "std::numeric_limits<int64_t>::min()"
    return f"static_cast<{ct}>({v}LL)"
