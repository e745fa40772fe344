"""Operator sets for PyTorch programs: prims, a canonical ATen set, decompositions, fake tensors and an ATen-level tracer."""

__version__ = "0.1.0.dev0"

from danlu_primtorch.canonical import CANONICAL_OPS, is_canonical  # noqa: E402, F401
from danlu_primtorch.decompositions import decomposition_table  # noqa: E402, F401
