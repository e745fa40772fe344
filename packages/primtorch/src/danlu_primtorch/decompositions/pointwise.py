"""Pointwise ops that are not canonical: scalar spellings, clamps, fused arithmetic."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


@register(aten.add.Scalar)
def add_scalar(self, other, alpha=1):
    return aten.add.Tensor(self, other, alpha=alpha)
