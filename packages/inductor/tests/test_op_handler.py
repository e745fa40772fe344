"""The shared ops handler (codegen/op_handler.py) and its two targets, without a kernel:
every op the lowerings can emit exists in both targets, both give each result the same
dtype, and a few expressions come out as meant."""

from __future__ import annotations

import pytest
import torch

from danlu_inductor.codegen.cpp.overrides import CppOverrides
from danlu_inductor.codegen.op_handler import (
    FLOAT_MATH,
    ROUNDING,
    SPELLED,
    CSEVar,
    OpHandler,
)
from danlu_inductor.codegen.triton.overrides import TritonOverrides, TVar
from danlu_inductor.ir.ops import ALL_OPS, BINARY, UNARY

TARGETS = {"cpp": CppOverrides, "triton": TritonOverrides}
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
DTYPES = (*FLOATS, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
# the lowerings compute these in floats (pointwise.py, int_to_float)
FLOAT_ONLY = (set(FLOAT_MATH) - set(ROUNDING)) | {"rsqrt", "sigmoid", "reciprocal"}


class Recorder:
    """A kernel stand-in: ``emit`` names each expression and keeps it."""

    def __init__(self, target):
        self.target = target
        self.exprs = []

    def emit(self, expr, dtype, dims=None):
        self.exprs.append(expr)
        name = f"tmp{len(self.exprs) - 1}"
        return CSEVar(name, dtype) if self.target == "cpp" else TVar(name, dtype, dims)

    def divides_by_row_value(self, a, b):  # C++ truediv asks (a row reduction's divisor)
        return False


def handler(target):
    rec = Recorder(target)
    return TARGETS[target](rec), rec


def value(target, name, dtype, dims="x"):
    return CSEVar(name, dtype) if target == "cpp" else TVar(name, dtype, frozenset(dims))


def test_the_base_has_a_method_for_every_op():
    assert [n for n in ALL_OPS if not callable(getattr(OpHandler, n, None))] == []


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_spells_exactly_the_spelled_ops(target):
    assert set(TARGETS[target].SPELLING) == SPELLED


def test_every_op_runs_in_both_targets_with_the_same_result_dtype():
    checked = 0
    for op in UNARY + BINARY:
        for dtype in FLOATS if op in FLOAT_ONLY else DTYPES:
            out = {}
            for target in TARGETS:
                h, _ = handler(target)
                args = [value(target, n, dtype) for n in "ab"[: 1 if op in UNARY else 2]]
                out[target] = getattr(h, op)(*args).dtype
            assert out["cpp"] == out["triton"], (op, dtype, out)
            checked += 1
    assert checked > 500


def test_a_target_without_a_spelling_fails_when_defined():
    partial = {k: v for k, v in CppOverrides.SPELLING.items() if k != "hypot"}
    with pytest.raises(TypeError, match="hypot"):
        type("NoHypot", (CppOverrides,), {"SPELLING": partial})

    def hypot(self, a, b):  # implementing the op instead of spelling it is fine
        return self.emit(f"my_hypot({a}, {b})", a.dtype, a, b)

    own = type("OwnHypot", (CppOverrides,), {"SPELLING": partial, "hypot": hypot})
    h = own(Recorder("cpp"))
    assert h.hypot(value("cpp", "a", torch.float32), value("cpp", "b", torch.float32)).dtype


def exprs(target, fn):
    """The expressions ``fn(handler, value)`` emits."""
    h, rec = handler(target)
    fn(h, lambda name, dtype, dims="x": value(target, name, dtype, dims))
    return rec.exprs


@pytest.mark.parametrize(
    "target,expected",
    [
        ("cpp", ["static_cast<int16_t>((static_cast<int16_t>(a) + static_cast<int16_t>(b)))"]),
        ("triton", ["(a.to(tl.int16) + b.to(tl.int16))"]),
    ],
)
def test_binary_ops_promote_like_torch(target, expected):
    assert exprs(target, lambda h, v: h.add(v("a", torch.int8), v("b", torch.uint8))) == expected


@pytest.mark.parametrize(
    "target,expected",
    [
        ("cpp", ["(a || b)", "(a && b)", "(a || (!b))", "(!a)"]),
        ("triton", ["(a | b)", "(a & b)", "(a | (b == 0))", "(a == 0)"]),
    ],
)
def test_bool_arithmetic_is_logic(target, expected):
    def run(h, v):
        a, b = v("a", torch.bool), v("b", torch.bool)
        h.add(a, b), h.mul(a, b), h.pow(a, b), h.bitwise_not(a)

    assert exprs(target, run) == expected


@pytest.mark.parametrize(
    "target,expected",
    [
        ("cpp", ["(c ? static_cast<double>(a) : b)", "dl_from_bf16(dl_to_bf16(a))"]),
        ("triton", ["tl.where(c, a.to(tl.float64), b)", "a.to(tl.bfloat16).to(tl.float32)"]),
    ],
)
def test_where_and_casts(target, expected):
    def run(h, v):
        w = h.where(v("c", torch.bool), v("a", torch.float32), v("b", torch.float64, "r"))
        assert w.dtype == torch.float64
        if target == "triton":
            assert w.dims == frozenset("xr")  # the union of the operands' block dims
        h.to_dtype(v("a", torch.float32), torch.bfloat16)
        widened = h.to_dtype(v("h", torch.bfloat16), torch.float32)  # held exactly already
        assert (widened.name, widened.dtype) == ("h", torch.float32)

    assert exprs(target, run) == expected


@pytest.mark.parametrize(
    "target,expected",
    [
        (
            "cpp",
            [
                "static_cast<int64_t>(dl_floordiv<int64_t>(a, b))",
                "static_cast<double>(dl_floordiv<double>(x, y))",
                "dl_exp(x)",
                "false",
            ],
        ),
        (
            "triton",
            [
                "dm.floordiv_int(a, b)",
                "dm.floordiv_float(x, y)",
                "dm.exp(x)",
                "tl.full([], False, tl.int1)",
            ],
        ),
    ],
)
def test_spellings_by_kind_and_integer_rules(target, expected):
    def run(h, v):
        a, b = v("a", torch.int64), v("b", torch.int64)
        x, y = v("x", torch.float64), v("y", torch.float64)
        h.floordiv(a, b), h.floordiv(x, y), h.exp(x), h.isnan(a)
        assert h.floor(a) is a and h.round(a) is a  # integers are already whole

    assert exprs(target, run) == expected


def test_triton_refuses_integer_transcendentals_and_takes_fp32_primitives():
    h, rec = handler("triton")
    with pytest.raises(NotImplementedError, match="exp of torch.int64 in the Triton backend"):
        h.exp(value("triton", "a", torch.int64))
    h.exp(value("triton", "f", torch.bfloat16))
    h.rsqrt(value("triton", "f", torch.float32))
    assert rec.exprs == ["tl.exp(f)", "(1.0 / tl.sqrt_rn(f))"]
