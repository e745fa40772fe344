"""Making broadcasting, type promotion and Python scalars explicit, in prims.

A decomposition never hands a prim mixed shapes or dtypes: it computes the result and
computation dtypes (``danlu_primtorch.type_promotion``), turns every operand into a tensor of
the computation dtype (``scalar_tensor`` / ``convert_element_type``), broadcasts it to the
common shape (``broadcast_in_dim``), applies the same-shape prim, and converts the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from danlu_primtorch.type_promotion import Promotion, elementwise_dtypes, is_number

P = torch.ops.danlu_prims


def broadcast_shapes(*shapes: Sequence) -> list:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape):
            d = ndim - len(shape) + i
            if out[d] == 1:
                out[d] = size
            elif size != 1 and size != out[d]:
                raise RuntimeError(
                    f"shapes {[tuple(s) for s in shapes]} are not broadcastable (dim {d})"
                )
    return out


def common_device(*operands: object) -> torch.device:
    """The device of the first tensor with dims, else of the first tensor (CPU for numbers)."""
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    for t in tensors:
        if t.dim() > 0 and t.device.type != "cpu":
            return t.device
    for t in tensors:
        if t.dim() > 0:
            return t.device
    return tensors[0].device if tensors else torch.device("cpu")


def convert(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else P.convert_element_type(t, dtype)


def broadcast_to(t: torch.Tensor, shape: Sequence) -> torch.Tensor:
    shape = list(shape)
    if list(t.shape) == shape:
        return t
    offset = len(shape) - t.dim()
    return P.broadcast_in_dim(t, shape, list(range(offset, len(shape))))


def operand(x: object, dtype: torch.dtype, shape: Sequence, device: torch.device) -> torch.Tensor:
    """``x`` (tensor or Python number) as a ``dtype`` tensor of ``shape`` on ``device``."""
    if is_number(x):
        t = P.scalar_tensor(x, dtype=dtype, device=device)
    elif isinstance(x, torch.Tensor):
        t = x
        if t.device != device:
            if t.dim() != 0:
                raise RuntimeError(f"operands on {t.device} and {device}")
            t = P.device_put(t, device)
        t = convert(t, dtype)
    else:
        raise TypeError(f"expected a tensor or a number, got {type(x).__name__}")
    return broadcast_to(t, shape)


def shape_of(x: object) -> list:
    return list(x.shape) if isinstance(x, torch.Tensor) else []


def elementwise(
    prim: Callable,
    *operands: object,
    promotion: Promotion = Promotion.DEFAULT,
    opmath: bool = True,
) -> torch.Tensor:
    """``prim`` applied to promoted, broadcast operands; the result in the op's result dtype.

    ``opmath``: compute float16/bfloat16 in float32 (eager does for arithmetic and math; for
    exact ops such as comparisons, max/min or negation it changes nothing and is skipped).
    """
    compute, result = elementwise_dtypes(*operands, promotion=promotion)
    if not opmath:
        compute = elementwise_dtypes(*operands, promotion=Promotion.DEFAULT)[1]
        if promotion is Promotion.INT_TO_FLOAT:
            compute = result
    shape = broadcast_shapes(*(shape_of(x) for x in operands))
    device = common_device(*operands)
    args = [operand(x, compute, shape, device) for x in operands]
    return convert(prim(*args), result)


def full_like_shape(t: torch.Tensor, value: object, dtype: torch.dtype | None = None):
    """A tensor of t's shape filled with value (as a broadcast 0-d tensor: a view, no memory)."""
    s = P.scalar_tensor(value, dtype=dtype or t.dtype, device=t.device)
    return broadcast_to(s, t.shape)


def canonical_dim(dim: int, ndim: int) -> int:
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % bound


def reduction_dims(dims: Sequence[int] | int | None, ndim: int) -> list[int]:
    """ATen's dims argument as sorted non-negative dims; None or [] means all dims."""
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(ndim))
    out = sorted({canonical_dim(d, ndim) for d in dims})
    return out if ndim else []


def keep_dims(t: torch.Tensor, dims: Sequence[int], keepdim: bool) -> torch.Tensor:
    return P.expand_dims(t, list(dims)) if keepdim and dims else t
