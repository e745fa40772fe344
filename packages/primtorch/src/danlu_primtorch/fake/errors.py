"""Exceptions raised by fake tensors.

Capture (danlu_dynamo) turns ``DataDependentOutputError`` into a graph break: the op needs
the values of a tensor, which a fake tensor does not have.
"""

from __future__ import annotations


class DataDependentOutputError(RuntimeError):
    """An op's output (its value or its shape) depends on tensor data a fake tensor lacks.

    Raised for ``.item()``, ``.tolist()``, ``bool(t)``, ``nonzero``, ``unique``,
    ``masked_select``, boolean-mask indexing and every other ATen op tagged
    ``data_dependent_output`` or ``dynamic_output_shape`` (``index.Tensor`` with integer
    indices has a shape known from metadata and runs). ``op`` is the ``OpOverload``
    (or a method name such as ``"tolist"``) that asked for data.
    """

    def __init__(self, op, reason: str = ""):
        self.op = op
        msg = f"{op} needs tensor data that a fake tensor does not have"
        if reason:
            msg += f": {reason}"
        super().__init__(msg)


class UnsupportedFakeOp(RuntimeError):
    """An op cannot be run on fake tensors: it has no meta kernel and no safe fallback."""

    def __init__(self, op, reason: str):
        self.op = op
        super().__init__(f"cannot run {op} on fake tensors: {reason}")


class FakeTensorMixingError(RuntimeError):
    """A real tensor met fake tensors in one op (other than a real CPU 0-dim scalar)."""
