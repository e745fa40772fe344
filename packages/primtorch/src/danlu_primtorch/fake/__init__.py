"""Fake tensors: run ATen ops on metadata only, on any device, without the device."""

from .errors import DataDependentOutputError, FakeTensorMixingError, UnsupportedFakeOp
from .mode import FakeTensorMode
from .tensor import FakeTensor, in_kernel

__all__ = [
    "DataDependentOutputError",
    "FakeTensor",
    "FakeTensorMixingError",
    "FakeTensorMode",
    "UnsupportedFakeOp",
    "in_kernel",
]
