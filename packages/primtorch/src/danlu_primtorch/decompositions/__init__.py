"""ATen -> canonical ATen decompositions, one file per op family.

Importing this package fills ``registry.CANONICAL_DECOMPOSITIONS``; use
``danlu_primtorch.decomposition_table`` to get a table.
"""

from __future__ import annotations

from danlu_primtorch.decompositions import (  # noqa: F401  (imported for their registrations)
    registry,
)
from danlu_primtorch.decompositions.registry import CANONICAL_DECOMPOSITIONS, FAMILY, register
from danlu_primtorch.decompositions.table import decomposition_table

__all__ = ["CANONICAL_DECOMPOSITIONS", "FAMILY", "decomposition_table", "register"]
