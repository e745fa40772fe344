"""The memory format of a convolution's result, as eager's kernels choose it.

ATen's meta kernel for ``convolution`` always describes a contiguous result, but the cuDNN and
oneDNN kernels that eager runs write a channels-last one whenever the input or the weight is
channels-last. A trace that kept the meta kernel's strides would plan a copy after every such
convolution (and the layer after it would read the wrong order), so fake convolutions get the
strides eager produces.
"""

from __future__ import annotations

import torch

# 2-D only: for 3-D convolutions the CPU kernels keep a contiguous result even then
_FORMATS = {4: torch.channels_last}


def _suggests(t: torch.Tensor, fmt) -> bool:
    # ambiguous strides (a size-1 channel or spatial extent) count as contiguous, as in ATen
    return t.is_contiguous(memory_format=fmt) and not t.is_contiguous()


def conv_memory_format(x: torch.Tensor, weight: torch.Tensor):
    """The channels-last format the result takes, or None for a contiguous result."""
    fmt = _FORMATS.get(x.dim())
    if fmt is None or any(isinstance(s, torch.SymInt) for s in (*x.shape, *weight.shape)):
        return None
    if any(t.dim() == x.dim() and _suggests(t, fmt) for t in (x, weight)):
        return fmt
    return None


def restride_conv_output(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``out`` (a meta tensor from the meta kernel) with eager's strides."""
    fmt = conv_memory_format(x, weight)
    if fmt is None or out.is_contiguous(memory_format=fmt):
        return out
    with torch._C._DisableTorchDispatch():
        return torch.empty(out.shape, dtype=out.dtype, device=out.device, memory_format=fmt)
