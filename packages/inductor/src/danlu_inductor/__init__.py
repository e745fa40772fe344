"""A loop-level compiler for ATen graphs: fusion, and C++/OpenMP and Triton code generation."""

__version__ = "0.1.0.dev0"
