"""Triton spellings: dtypes, index expressions, constants."""

from __future__ import annotations

import math

import torch

from danlu_inductor.codegen.index_printer import IndexPrinter

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


class _TritonIndex(IndexPrinter):
    """Value-level floordiv/mod (possibly negative operands) go through ``dm.floordiv`` /
    ``dm.pymod`` instead."""

    def clamp(self, a, lo, hi):
        return f"tl.minimum(tl.maximum({a}, {lo}), {hi})"

    def extremum(self, name, args):
        out = args[0]
        for a in args[1:]:
            out = f"tl.{name}imum({out}, {a})"
        return out


texpr = _TritonIndex()  # an integer index expression as Triton source


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
