"""The registry every decomposition family file writes into."""

from __future__ import annotations

from collections.abc import Callable

import torch

from danlu_primtorch.canonical import CANONICAL_OPS

OpOverload = torch._ops.OpOverload

#: ATen overload -> Python function with the same signature, written in canonical ATen ops
#: (possibly through other decomposed ops: the tracer applies the table recursively).
CANONICAL_DECOMPOSITIONS: dict[OpOverload, Callable] = {}

#: ATen overload -> family name ("activations", "norms", ...), for the coverage report.
FAMILY: dict[OpOverload, str] = {}


def register(*ops: OpOverload, family: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the decomposition of every overload in ``ops``.

    Canonical ops are refused: decomposing them would loop (or lose the op a backend lowers).
    """

    def wrap(fn: Callable) -> Callable:
        fam = family or fn.__module__.rsplit(".", 1)[-1]
        for op in ops:
            if not isinstance(op, OpOverload):
                raise TypeError(f"register wants OpOverloads, got {op!r}")
            if op in CANONICAL_OPS:
                raise ValueError(f"{op} is canonical; it must not be decomposed")
            if op._schema.is_mutable:
                raise ValueError(f"{op} mutates its inputs; the table holds functional ops only")
            if only_composite_implicit(op):
                # the dispatcher decomposes these before any mode or tracer sees them
                raise ValueError(f"{op} is CompositeImplicitAutograd; it never reaches us")
            if op in CANONICAL_DECOMPOSITIONS:
                raise ValueError(f"{op} already has a decomposition")
            CANONICAL_DECOMPOSITIONS[op] = fn
            FAMILY[op] = fam
        return fn

    return wrap


#: Ops whose output values are random or unspecified (``empty_like``, dropout, ...): checkers
#: compare them on shape/dtype/device only and test their distributions separately.
VALUES_UNSPECIFIED: set[OpOverload] = set()


def values_unspecified(*ops: OpOverload) -> None:
    VALUES_UNSPECIFIED.update(ops)


def only_composite_implicit(op: OpOverload) -> bool:
    """True for ops the dispatcher always decomposes itself (no backend kernel of their own)."""
    keys = torch._C.DispatchKey
    return op.has_kernel_for_dispatch_key(keys.CompositeImplicitAutograd) and not any(
        op.has_kernel_for_dispatch_key(k)
        for k in (keys.CPU, keys.CUDA, keys.CompositeExplicitAutograd, keys.Meta)
    )
