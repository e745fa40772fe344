"""``decomposition_table(level)``: the tables the tracer applies."""

from __future__ import annotations

from collections.abc import Callable

import torch

from danlu_primtorch.decompositions.registry import CANONICAL_DECOMPOSITIONS

LEVELS = ("canonical", "prims")


def _prim_table() -> dict[torch._ops.OpOverload, Callable]:
    """The canonical -> prims table, from the prims side of the package."""
    try:
        from danlu_primtorch.prim_decompositions import prim_decomposition_table
    except ModuleNotFoundError as e:  # the prims side not present yet: canonical level only
        if e.name and e.name.startswith("danlu_primtorch.prim_decompositions"):
            return {}
        raise
    return dict(prim_decomposition_table())


def decomposition_table(level: str = "canonical") -> dict[torch._ops.OpOverload, Callable]:
    """A fresh dict from ATen ``OpOverload`` to a Python decomposition.

    ``"canonical"``: every decomposable ATen op, down to the canonical ATen set
    (``danlu_primtorch.canonical.CANONICAL_OPS``); canonical ops are not in it.
    ``"prims"``: the canonical table plus the canonical -> prims table, so applying it
    recursively reaches prims. Entries can produce other decomposable ops: apply recursively.
    """
    if level not in LEVELS:
        raise ValueError(f"decomposition_table: level must be one of {LEVELS}, got {level!r}")
    _load_families()
    table = dict(CANONICAL_DECOMPOSITIONS)
    if level == "prims":
        for op, fn in _prim_table().items():
            table.setdefault(op, fn)  # an ATen op both sides know: the canonical one goes first
    return table


def _load_families() -> None:
    import danlu_primtorch.decompositions.families  # noqa: F401
