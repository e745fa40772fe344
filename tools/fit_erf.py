"""Fits the float32 erf of the C++ prelude (danlu_inductor/codegen/cpp/prelude.py, ``dl_erf``)
and prints it as C++.

    python tools/fit_erf.py [--split 1.0] [--small 6] [--large 14]

|x| < split: erf(x) = x P(x^2), P fitted for relative error; split <= |x| < 4:
erf(x) = 1 - Q(u), u the affine map of [split, 4] onto [-1, 1], Q fitted for absolute error
of erfc; |x| >= 4: 1 (erf(4) rounds to 1 in float32). Both fits are least squares with
Lawson reweighting toward the minimax error, against erf and erfc in 30-digit arithmetic
(mpmath, which sympy installs). Checking the float32 result over every float is left to a
C++ harness; the tests sweep it in ulps (packages/inductor/tests/test_cpp_math.py).
"""

from __future__ import annotations

import argparse

import numpy as np
from mpmath import erf, erfc, mp


def _fit(basis: np.ndarray, target: np.ndarray, weight: np.ndarray, rounds: int = 40):
    w = np.ones_like(target)
    for _ in range(rounds):
        sw = np.sqrt(w) * weight
        coeffs, *_ = np.linalg.lstsq(basis * sw[:, None], target * sw, rcond=None)
        err = np.abs(basis @ coeffs - target) * weight
        w = w * (err / err.max() + 1e-3)
        w /= w.mean()
    return coeffs, err.max()


def _horner(name: str, coeffs, var: str) -> list[str]:
    cs = [float(c) for c in coeffs][::-1]
    lines = [f"    float {name} = {cs[0]!r}f;"]
    lines += [f"    {name} = DL_FMA({name}, {var}, {c!r}f);" for c in cs[1:]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", type=float, default=1.0)
    ap.add_argument("--small", type=int, default=6, help="degree of P in x^2")
    ap.add_argument("--large", type=int, default=14, help="degree of Q in u")
    args = ap.parse_args()
    mp.dps = 30
    split = args.split
    xs = np.linspace(1e-4, split, 6000)
    fs = np.array([float(erf(v)) / v for v in xs])
    p, p_err = _fit(np.vstack([(xs * xs) ** k for k in range(args.small + 1)]).T, fs, 1 / fs)
    centre, half = (split + 4) / 2, (4 - split) / 2
    xl = np.linspace(split, 4, 8000)
    ul = (xl - centre) / half
    fl = np.array([float(erfc(v)) for v in xl])
    q, q_err = _fit(np.vstack([ul**k for k in range(args.large + 1)]).T, fl, np.ones_like(fl))
    print(f"// P: relative error {p_err:.2e}; Q: absolute error of erfc {q_err:.2e}")
    lines = [
        "static inline float dl_erf(float x) {",
        "    float ax = std::min(std::fabs(x), 4.0f);",
        "    float t = ax * ax;",
        *_horner("p", p, "t"),
        "    float small = ax * p;",
        f"    float u = DL_FMA(ax, {1 / half!r}f, {-centre / half!r}f);",
        *_horner("s", q, "u"),
        f"    float r = ax < {split!r}f ? small : 1.0f - s;",
        "    r = std::copysign(std::min(r, 1.0f), x);",
        "    return x != x ? x : r;",
        "}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
