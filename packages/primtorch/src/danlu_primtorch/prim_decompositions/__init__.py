"""Canonical ATen -> prims decompositions.

For the ``decomposition_table(level="prims")`` merge (read this first):

* :func:`prim_decomposition_table` returns a fresh dict ``OpOverload -> callable``. Every key
  is a canonical ATen overload (``danlu_primtorch.canonical.CANONICAL_OPS``); each callable
  has the overload's signature (positional and keyword arguments as ATen names them) and
  calls only ``torch.ops.danlu_prims.*`` ops (no ATen ops, so no recursion is needed).
* Broadcasting, type promotion, Python scalars, ATen's defaults (``dim=None``, negative dims,
  ``-1`` sizes, ``keepdim``) are all explicit in the prims they emit.
* For arguments a decomposition does not cover (bool-mask indexing, attention dropout,
  non-strided layouts, dtypes outside :data:`SUPPORTED_DTYPES` such as complex) the table's
  callable returns ``NotImplemented``: keep the ATen op (the
  tracer's convention). The raw functions in :data:`PRIM_DECOMPOSITIONS` raise
  :class:`PrimDecompositionUnsupported` instead, with the reason. Any other exception is the
  error eager would raise for the same bad input.
* Canonical ops with no entry here stay ATen at the prims level:
  :data:`NOT_DECOMPOSED` lists them with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch.utils._pytree import tree_leaves

from danlu_primtorch.prim_decompositions import (  # noqa: F401  (imported for registrations)
    backward_kernels,
    creation,
    data_movement,
    library,
    pointwise,
    reductions,
    views,
)
from danlu_primtorch.prim_decompositions.registry import (
    PRIM_DECOMPOSITIONS,
    PrimDecompositionUnsupported,
)

aten = torch.ops.aten

#: Canonical ops deliberately left as ATen at the prims level, with the reason.
NOT_DECOMPOSED: dict[torch._ops.OpOverload, str] = {
    aten._local_scalar_dense.default: "reads a value back to Python: leaves the graph",
    aten._scaled_dot_product_efficient_attention.default: "GPU attention kernel returning RNG state; not mapped yet",
    aten._scaled_dot_product_efficient_attention_backward.default: "GPU attention backward; not mapped yet",
    aten._scaled_dot_product_flash_attention.default: "GPU attention kernel returning RNG state; not mapped yet",
    aten._scaled_dot_product_flash_attention_backward.default: "GPU attention backward; not mapped yet",
}


#: Tensor dtypes the prim set covers; any other operand (complex, float8, uint16..64) keeps
#: the ATen op.
SUPPORTED_DTYPES = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    }
)


def _unsupported_dtype(args, kwargs) -> bool:
    for x in tree_leaves((args, kwargs)):
        if isinstance(x, torch.Tensor) and x.dtype not in SUPPORTED_DTYPES:
            return True
        if isinstance(x, torch.dtype) and x not in SUPPORTED_DTYPES:
            return True
        if isinstance(x, complex):
            return True
    return False


def _keep_op_when_unsupported(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def decomposition(*args, **kwargs):
        if _unsupported_dtype(args, kwargs):
            return NotImplemented
        try:
            return fn(*args, **kwargs)
        except PrimDecompositionUnsupported:
            return NotImplemented

    return decomposition


def prim_decomposition_table() -> dict[torch._ops.OpOverload, Callable]:
    """A fresh dict: canonical ATen overload -> its decomposition into danlu prims.

    An entry returns ``NotImplemented`` for arguments it does not cover (keep the ATen op).
    """
    return {op: _keep_op_when_unsupported(fn) for op, fn in PRIM_DECOMPOSITIONS.items()}


__all__ = [
    "NOT_DECOMPOSED",
    "PRIM_DECOMPOSITIONS",
    "PrimDecompositionUnsupported",
    "SUPPORTED_DTYPES",
    "prim_decomposition_table",
]
