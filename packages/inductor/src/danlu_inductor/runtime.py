"""Small helpers the generated wrapper modules call at run time."""

from __future__ import annotations

import torch

empty_strided = torch.empty_strided


def ensure_layout(t: torch.Tensor, size: tuple, stride: tuple) -> torch.Tensor:
    """``t`` itself when it has the layout the kernels were built for, else a copy that has it."""
    if t.stride() == stride and t.shape == size:
        return t
    if tuple(t.shape) != size:
        raise ValueError(
            f"compiled graph expects an input of shape {size}, got {tuple(t.shape)}; "
            "recompile for new shapes"
        )
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def raise_index_error(kernel: str):
    raise IndexError(f"index out of range in a gather/embedding (kernel {kernel})")
