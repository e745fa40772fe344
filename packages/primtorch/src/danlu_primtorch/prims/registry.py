"""The prim registry: one ``torch.library`` namespace (``danlu_prims``) and a catalogue of it.

Every prim is defined once through :func:`define_prim`, which

* defines the schema in the ``danlu_prims`` namespace, so the op is
  ``torch.ops.danlu_prims.<name>.default``;
* registers the eager reference implementation for every backend
  (``CompositeExplicitAutograd``: written with plain eager torch ops, runs on any device);
* registers the meta function for the ``Meta`` key (shape, dtype, strides; the output device
  is the input device, or the ``device`` argument for creation and RNG prims);
* records a :class:`PrimInfo` in :data:`PRIMS` so tools can iterate the set by kind.

Prims have no autograd formula: they live below autograd (a traced graph of prims is already
differentiated).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import torch

NAMESPACE = "danlu_prims"
#: Hard cap on the size of the set: a prim set that keeps growing is no longer primitive.
MAX_PRIMS = 150

_LIB = torch.library.Library(NAMESPACE, "DEF")


class PrimKind(enum.Enum):
    ELEMENTWISE = "elementwise"
    VIEW = "view"
    REDUCTION = "reduction"
    SCAN = "scan"
    CREATION = "creation"
    RNG = "rng"
    INDEXING = "indexing"
    DATA_MOVEMENT = "data_movement"
    LIBRARY = "library"


@dataclass(frozen=True)
class PrimInfo:
    """One prim: its name, kind, the OpOverload, its two implementations and its semantics."""

    name: str
    kind: PrimKind
    schema: str
    op: torch._ops.OpOverload
    meta: Callable
    impl: Callable
    doc: str

    @property
    def summary(self) -> str:
        """The first line of the docstring: the one-line semantics used in the README table."""
        return self.doc.strip().splitlines()[0]


#: name -> PrimInfo, in definition order.
PRIMS: dict[str, PrimInfo] = {}


def define_prim(
    schema: str, kind: PrimKind, *, meta: Callable, impl: Callable, doc: str
) -> torch._ops.OpOverload:
    """Define one prim; returns ``torch.ops.danlu_prims.<name>.default``."""
    name = schema.split("(", 1)[0]
    if name in PRIMS:
        raise ValueError(f"prim {name!r} defined twice")
    if len(PRIMS) >= MAX_PRIMS:
        raise RuntimeError(f"the prim set is capped at {MAX_PRIMS} ops")
    if not doc or not doc.strip():
        raise ValueError(f"prim {name!r} needs a docstring stating its semantics")
    _LIB.define(schema)
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    _LIB.impl(name, meta, "Meta")
    op = getattr(getattr(torch.ops, NAMESPACE), name).default
    op.__doc__ = doc
    meta.__doc__ = meta.__doc__ or f"Meta function of danlu_prims.{name}."
    PRIMS[name] = PrimInfo(name, kind, schema, op, meta, impl, doc.strip())
    return op


def prims_of_kind(kind: PrimKind) -> list[PrimInfo]:
    return [p for p in PRIMS.values() if p.kind is kind]


def is_prim(op: object) -> bool:
    """True for a ``danlu_prims`` OpOverload (or its packet)."""
    ns = getattr(op, "namespace", None)
    return ns == NAMESPACE


def format_prim_table() -> str:
    """The prim set as a Markdown table (name, kind, one-line semantics), in kind order."""
    rows = ["| prim | kind | semantics |", "|---|---|---|"]
    for kind in PrimKind:
        for p in prims_of_kind(kind):
            summary = p.summary.replace("|", "\\|")
            rows.append(f"| `{p.name}` | {kind.value} | {summary} |")
    return "\n".join(rows)
