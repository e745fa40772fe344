"""The danlu prim set: a closed set of primitive ops in the ``danlu_prims`` namespace.

Each prim is ``torch.ops.danlu_prims.<name>.default`` and is also an attribute here
(``danlu_primtorch.prims.add``). :data:`PRIMS` maps every name to a :class:`PrimInfo` (kind,
schema, meta function, eager reference, docstring); :func:`prims_of_kind` filters it.

Contract (see each docstring for details):

* elementwise prims take operands of one shape and dtype (no broadcasting, no promotion);
  outputs are dense in the inputs' memory order;
* view prims alias their input and give exact view strides;
* reductions take explicit dims, drop them, keep the input dtype, give contiguous outputs;
* creation and RNG prims take explicit dtype and device (RNG: explicit generator semantics,
  see ``danlu_primtorch.prims.rng``);
* library prims (mm, bmm, convolution, scaled_dot_product_attention) are called, not generated.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims import (  # noqa: F401  (imported for their registrations)
    creation,
    data_movement,
    elementwise,
    indexing,
    library,
    reductions,
    rng,
    views,
)
from danlu_primtorch.prims.checks import PrimArgumentError
from danlu_primtorch.prims.registry import (
    MAX_PRIMS,
    NAMESPACE,
    PRIMS,
    PrimInfo,
    PrimKind,
    is_prim,
    prims_of_kind,
)

__all__ = [
    "MAX_PRIMS",
    "NAMESPACE",
    "PRIMS",
    "PrimArgumentError",
    "PrimInfo",
    "PrimKind",
    "is_prim",
    "prims_of_kind",
    *PRIMS,
]


def __getattr__(name: str) -> torch._ops.OpOverload:
    info = PRIMS.get(name)
    if info is None:
        raise AttributeError(f"danlu_primtorch.prims has no prim {name!r}")
    return info.op


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PRIMS))
