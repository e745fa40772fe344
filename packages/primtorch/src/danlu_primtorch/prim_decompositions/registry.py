"""Where every canonical -> prims decomposition registers itself."""

from __future__ import annotations

from collections.abc import Callable

import torch

OpOverload = torch._ops.OpOverload

#: canonical ATen overload -> Python function with the overload's signature, written in prims.
PRIM_DECOMPOSITIONS: dict[OpOverload, Callable] = {}


class PrimDecompositionUnsupported(NotImplementedError):
    """This call of a covered op has arguments its prim decomposition does not handle
    (e.g. a bool-mask index: its output shape depends on data). Keep the ATen op."""


def register(*ops: OpOverload) -> Callable[[Callable], Callable]:
    def wrap(fn: Callable) -> Callable:
        for op in ops:
            if not isinstance(op, OpOverload):
                raise TypeError(f"register wants OpOverloads, got {op!r}")
            if op in PRIM_DECOMPOSITIONS:
                raise ValueError(f"{op} already has a prim decomposition")
            PRIM_DECOMPOSITIONS[op] = fn
        return fn

    return wrap
