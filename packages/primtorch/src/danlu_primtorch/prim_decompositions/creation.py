"""Creation, randomness and casts -> creation/RNG/data-movement prims.

ATen's optional dtype/device arguments are resolved here (dtype from the fill value or the
default dtype, device CPU); ``layout`` must be strided and ``pin_memory`` is ignored (it has
no meaning inside a graph).
"""

from __future__ import annotations

import math

import torch

from danlu_primtorch.prim_decompositions.explicit import P, broadcast_to, convert
from danlu_primtorch.prim_decompositions.registry import PrimDecompositionUnsupported, register
from danlu_primtorch.prims.strides import channels_last_strides, contiguous_strides, like_strides
from danlu_primtorch.type_promotion import number_dtype

aten = torch.ops.aten


def _device(device):
    return torch.device("cpu") if device is None else torch.device(device)


def _strided(layout):
    if layout not in (None, torch.strided):
        raise PrimDecompositionUnsupported(f"layout {layout} is not strided")


@register(aten.full.default)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else number_dtype(fill_value)
    return P.full(list(size), fill_value, dtype=dtype, device=_device(device))


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.empty_strided(list(size), list(stride), dtype=dtype, device=_device(device))


@register(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.scalar_tensor(s, dtype=dtype, device=_device(device))


def _truncate(x):
    """int(x) for floats; integers (symbolic ones too) pass unchanged, so sizes stay symbolic."""
    return x if isinstance(x, (int, torch.SymInt)) else int(x)


@register(aten.arange.start_step)
def arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    numbers = (start, end, step)
    if dtype is None:
        floating = any(isinstance(x, (float, torch.SymFloat)) for x in numbers)
        dtype = torch.get_default_dtype() if floating else torch.int64
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) / step < 0:
        raise RuntimeError("arange: upper bound and larger bound inconsistent with step sign")
    device = _device(device)
    if not dtype.is_floating_point:
        # eager: int64 arange truncates start/end/step first; other integer dtypes size the
        # result from the exact bounds and step but step by the truncated values
        if dtype == torch.int64:
            start, end, step = (_truncate(x) for x in (start, end, step))
            if step == 0:
                raise RuntimeError("arange: step must be nonzero")
        if all(isinstance(x, (int, torch.SymInt)) for x in (start, end, step)):
            length = -((start - end) // step)  # exact ceil((end - start) / step)
        else:
            length = math.ceil((end - start) / step)
        values = P.iota(
            max(length, 0), start=int(start), step=int(step), dtype=torch.int64, device=device
        )
        return convert(values, dtype)
    # floating: start + i * step computed in double precision and cast once (as eager)
    length = math.ceil((end - start) / step)
    i = P.iota(length, start=0, step=1, dtype=torch.float64, device=device)
    shape = [length]

    def scalar(x):
        return broadcast_to(P.scalar_tensor(x, dtype=torch.float64, device=device), shape)

    values = P.add(scalar(start), P.mul(i, scalar(step)))
    return convert(values, dtype)


# --- randomness: same generator stream as eager (see danlu_primtorch.prims.rng) ------------------


@register(aten.rand.default)
def rand(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.uniform(list(size), 0.0, 1.0, dtype=dtype, device=_device(device))


@register(aten.randn.default)
def randn(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.normal(list(size), 0.0, 1.0, dtype=dtype, device=_device(device))


@register(aten.rand.generator)
def rand_generator(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.uniform(list(size), 0.0, 1.0, dtype=dtype, device=_device(device), generator=generator)


@register(aten.randn.generator)
def randn_generator(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return P.normal(list(size), 0.0, 1.0, dtype=dtype, device=_device(device), generator=generator)


@register(aten.randint.low)
def randint(low, high, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    _strided(layout)
    dtype = dtype if dtype is not None else torch.int64
    return P.randint(list(size), low, high, dtype=dtype, device=_device(device))


@register(aten.bernoulli.default)
def bernoulli(a, *, generator=None):
    if not a.dtype.is_floating_point:
        raise PrimDecompositionUnsupported("bernoulli of a non-float probability tensor")
    return P.bernoulli(a, generator=generator)


# --- casts and copies ----------------------------------------------------------------------------


def _layout_for(a, memory_format):
    if memory_format in (None, torch.preserve_format):
        return like_strides(a.shape, a.stride())
    if memory_format == torch.contiguous_format:
        return contiguous_strides(a.shape)
    if memory_format == torch.channels_last and a.dim() == 4:
        return channels_last_strides(a.shape)
    raise PrimDecompositionUnsupported(f"memory_format {memory_format} for a {a.dim()}-d tensor")


def _copy(a, dtype, device, memory_format):
    out = a
    if device is not None and torch.device(device) != a.device:
        out = P.device_put(out, torch.device(device))
    out = P.convert_element_type(out, dtype if dtype is not None else a.dtype)
    strides = _layout_for(a, memory_format)
    if tuple(out.stride()) != tuple(strides) and out.numel() > 1:
        out = P.copy_strided(out, list(strides))
    return out


@register(aten._to_copy.default)
def to_copy(
    a,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    non_blocking=False,
    memory_format=None,
):
    _strided(layout)
    return _copy(a, dtype, device, memory_format)


@register(aten.clone.default)
def clone(a, *, memory_format=None):
    return _copy(a, None, None, memory_format)


@register(aten.copy.default)
def copy(a, src, non_blocking=False):
    """A new tensor with a's shape, dtype and layout holding src (broadcast, converted)."""
    values = src
    if values.device != a.device:
        values = P.device_put(values, a.device)
    values = broadcast_to(P.convert_element_type(values, a.dtype), list(a.shape))
    strides = like_strides(a.shape, a.stride())
    return P.copy_strided(values, list(strides))
