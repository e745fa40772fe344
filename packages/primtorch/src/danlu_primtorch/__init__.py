"""Operator sets for PyTorch programs: prims, a canonical ATen set, decompositions, fake tensors and an ATen-level tracer."""

__version__ = "0.1.0.dev0"
