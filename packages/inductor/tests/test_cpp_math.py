"""The C++ prelude's own float32 math (exp, tanh, erf, sigmoid) against float64, in ulps.

These replace libm's scalar calls inside vectorized loops, so their accuracy is ours to
guarantee: dense sweeps over the ranges where each function is not constant, the subnormal
range of exp, and the special values (NaN, +-inf, +-0).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import compile_fn

# max ulp error we promise (docs/inductor.md); eager's own vectorized versions are ~0.6 ulp,
# its GELU erf 1.5e-7 absolute
ULP_BOUND = {"exp": 1.5, "tanh": 2.0, "erf": 3.0, "sigmoid": 3.0}
OPS = {
    "exp": torch.exp,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "sigmoid": torch.sigmoid,
}
RANGES = {
    "exp": [(-104.0, 88.72), (-2.0, 2.0)],
    "tanh": [(-10.0, 10.0), (-0.7, 0.7)],
    "erf": [(-4.5, 4.5), (-0.6, 0.6)],
    # below -88.7, 1 + exp(-x) overflows and sigmoid returns 0 instead of a subnormal; eager's
    # vectorized sigmoid does the same
    "sigmoid": [(-88.7, 30.0), (-3.0, 3.0)],
}
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30, 1e-40]


def _ulps(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    r32 = ref.float().numpy()
    spacing = torch.from_numpy(np.spacing(np.abs(r32)).astype(np.float64))
    spacing = spacing.clamp(min=2.0**-149)  # subnormals: one ulp is the smallest subnormal
    err = (got.double() - ref).abs() / spacing
    same = (got.double() == ref) | (torch.isnan(ref) & torch.isnan(got))
    return torch.where(same, torch.zeros_like(err), err)


def _inputs(name):
    parts = [torch.linspace(lo, hi, 400_003, dtype=torch.float32) for lo, hi in RANGES[name]]
    return torch.cat(parts + [torch.tensor(SPECIALS, dtype=torch.float32)])


SUBNORMAL_EXP = torch.linspace(-104.5, -87.0, 200_001, dtype=torch.float32)


@pytest.fixture(scope="module")
def compiled():
    """One graph (one compiler run) computing every function on its own sweep."""
    names = list(OPS)
    inputs = [_inputs(n) for n in names] + [SUBNORMAL_EXP]

    def fn(*xs):
        return [OPS[n](x) for n, x in zip(names, xs)] + [torch.exp(xs[-1])]

    c, _ = compile_fn(fn, *inputs)
    outs = c(*inputs)
    return dict(zip(names + ["exp_subnormal"], zip(inputs, outs)))


@pytest.mark.parametrize("name", list(OPS))
def test_float32_math_within_ulp_bound(name, compiled):
    fn = OPS[name]
    x, got = compiled[name]
    ref = fn(x.double())
    err = _ulps(got, ref)
    worst = int(err.argmax())
    assert err.max().item() <= ULP_BOUND[name], (
        f"{name}({x[worst].item()!r}) = {got[worst].item()!r}, float64 says {ref[worst].item()!r}"
        f" ({err.max().item():.2f} ulp)"
    )
    specials = x[-len(SPECIALS) :]
    assert torch.equal(torch.signbit(got[-len(SPECIALS) :]), torch.signbit(fn(specials))), name


def test_exp_subnormal_results_are_correctly_rounded_and_not_flushed(compiled):
    # exp(x) for x in [-103.97, -87.34] is subnormal in float32; it must not flush to zero
    x, got = compiled["exp_subnormal"]
    ref = torch.exp(x.double())
    assert ((got > 0) == (ref.float() > 0)).all()
    assert _ulps(got, ref).max().item() <= 1.0
