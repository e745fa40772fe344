"""Lowerings from ATen ops to the loop IR, one file per op family."""

from danlu_inductor.lowering import (  # noqa: F401  (imported for their registrations)
    convolution,
    creation,
    embedding_backward,
    extern,
    pointwise,
    pooling,
    reductions,
    softmax,
    views,
)
from danlu_inductor.lowering.registry import LOWERINGS, NotLowered

__all__ = ["LOWERINGS", "NotLowered"]
