"""Triton code generation: one ``@triton.jit`` kernel per fused group (in progress)."""
