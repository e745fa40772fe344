"""Rewrites of the ATen graph before lowering (each pass keeps the graph's results)."""

from danlu_inductor.passes.constant_folding import fold_constants
from danlu_inductor.passes.cpu_scalars import move_cpu_scalars
from danlu_inductor.passes.one_hot_sums import fold_one_hot_sums
from danlu_inductor.passes.pad_matmul import pad_matmuls

__all__ = ["fold_constants", "fold_one_hot_sums", "move_cpu_scalars", "pad_matmuls"]
