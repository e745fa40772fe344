"""Ahead-of-time autograd: joint forward/backward tracing at ATen level, functionalization and partitioning."""

__version__ = "0.1.0.dev0"
