"""Accuracy checks for comparing compiled results with eager ones (the PT2 rule).

`same(ref, res, fp64_ref=...)`: with a float64 reference, a result passes when its RMS error
against the float64 result is at most `multiplier` times eager's own RMS error plus `tol`; so a
compiled model is held to eager's precision, not to bit equality. Without a float64 reference
it falls back to `allclose(rtol, atol)` or, when `cos_similarity` is set, a cosine similarity.

`counting_backend(name)`: a backend that records every captured graph it is given, then hands
it to the backend `name`; for tests that count compiles.
"""

from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_leaves


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def same(
    ref,
    res,
    fp64_ref=None,
    *,
    tol: float = 1e-4,
    multiplier: float = 3.0,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    cos_similarity: bool = False,
) -> bool:
    ref_l, res_l = tree_leaves(ref), tree_leaves(res)
    fp64_l = tree_leaves(fp64_ref) if fp64_ref is not None else [None] * len(ref_l)
    if len(ref_l) != len(res_l) or len(fp64_l) != len(ref_l):
        return False
    for a, b, r64 in zip(ref_l, res_l, fp64_l):
        if not isinstance(a, torch.Tensor):
            if isinstance(a, float) and isinstance(b, float):
                if not math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
                    return False
            elif a != b:
                return False
            continue
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return False
            continue
        a, b = a.detach(), b.detach()
        if torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True):
            continue
        if cos_similarity and a.numel() > 1:
            cos = torch.nn.functional.cosine_similarity(
                a.double().flatten(), b.double().flatten(), dim=0
            )
            if cos >= 0.99:
                continue
            return False
        if isinstance(r64, torch.Tensor) and r64.is_floating_point():
            r64 = r64.detach().to(a.device)
            if _rmse(b, r64) <= multiplier * _rmse(a, r64) + tol:
                continue
        return False
    return True


def counting_backend(backend="eager"):
    """``(graphs, counting)``: ``counting`` appends each captured graph to ``graphs`` and
    compiles it with ``backend`` (a name or a backend callable)."""
    from .backends import lookup_backend

    graphs = []
    inner = lookup_backend(backend) if isinstance(backend, str) else backend

    def counting(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    return graphs, counting
