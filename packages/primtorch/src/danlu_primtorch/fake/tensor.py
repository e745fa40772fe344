"""The fake tensor: a meta tensor that reports a fake device.

A ``FakeTensor`` owns real ATen metadata (sizes, strides, storage offset, a meta storage shared
by its views), so every meta kernel, view op and in-place op behaves exactly as in eager. Its C++
device is ``meta``; Python sees ``fake_device`` (for example ``cuda:0``) through the ``device``
property. Keeping the C++ device ``meta`` is what lets autograd run on fake CUDA tensors on a
machine without CUDA: the autograd engine only ever sees meta tensors.

While a kernel runs on fake tensors (``in_kernel()``), ``device`` reports ``meta`` so Python meta
kernels that compare devices see one consistent device.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from .errors import DataDependentOutputError

_META = torch.device("meta")
_state = threading.local()


def in_kernel() -> bool:
    """True while a meta kernel runs on fake tensors (their ``device`` then reads ``meta``)."""
    return getattr(_state, "kernel_depth", 0) > 0


@contextlib.contextmanager
def kernel_invocation():
    """Run ATen kernels on the meta storage of fake tensors: Python dispatch off, devices meta."""
    _state.kernel_depth = getattr(_state, "kernel_depth", 0) + 1
    try:
        with torch._C._DisableTorchDispatch():
            yield
    finally:
        _state.kernel_depth -= 1


class FakeTensor(torch.Tensor):
    """A tensor with metadata only. Create through ``FakeTensorMode`` (factories, ``from_real``)."""

    fake_device: torch.device
    fake_mode: object  # the FakeTensorMode that made it

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, mode, meta: torch.Tensor, device: torch.device):
        if meta.device.type != "meta":
            raise TypeError(f"FakeTensor wraps a meta tensor, got device {meta.device}")
        self = torch.Tensor._make_subclass(cls, meta, meta.requires_grad)
        self.fake_device = device
        self.fake_mode = mode
        return self

    def __init__(self, *args, **kwargs):
        super().__init__()

    # --- the fake device, as Python sees it -------------------------------------------------
    @property
    def device(self):
        return _META if in_kernel() else self.fake_device

    @property
    def is_cuda(self):
        return not in_kernel() and self.fake_device.type == "cuda"

    @property
    def is_cpu(self):
        return not in_kernel() and self.fake_device.type == "cpu"

    @property
    def is_meta(self):
        return in_kernel() or self.fake_device.type == "meta"

    def get_device(self):
        d = self.device
        return -1 if d.type == "cpu" else (d.index if d.index is not None else 0)

    # ``param.data = moved`` (nn.Module.to) swaps the TensorImpl's contents; carry the device.
    @property
    def data(self):
        return torch._C.TensorBase.data.__get__(self)

    @data.setter
    def data(self, new):
        torch._C.TensorBase.data.__set__(self, new)
        if isinstance(new, FakeTensor):
            self.fake_device = new.fake_device

    # --- moves between (fake) devices ---------------------------------------------------------
    # Tensor.to's C++ binding guards the target device, which fails for CUDA on a machine
    # without it; a move is an ``aten._to_copy`` with a device, so call that directly.
    def to(self, *args, **kwargs):
        if not in_kernel():
            try:
                parsed = torch._C._nn._parse_to(
                    *args, **{k: v for k, v in kwargs.items() if k != "copy"}
                )
            except (TypeError, RuntimeError):
                parsed = None  # unusual signature (positional copy=...): let torch parse it
            if parsed is not None and parsed[0] is not None and parsed[0].type != "meta":
                from .devices import normalize_device

                device, dtype, non_blocking, memory_format = parsed
                device = normalize_device(device)
                if device != self.fake_device:
                    return torch.ops.aten._to_copy.default(
                        self,
                        dtype=dtype,
                        device=device,
                        non_blocking=non_blocking,
                        memory_format=memory_format,
                    )
                kwargs.pop("device", None)
                args = tuple(a for a in args if not isinstance(a, str | torch.device))
        return super().to(*args, **kwargs)

    def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        device = torch.device("cuda", device) if isinstance(device, int) else device
        return self.to(device or "cuda", non_blocking=non_blocking, memory_format=memory_format)

    # --- things that need data -----------------------------------------------------------------
    def tolist(self):
        raise DataDependentOutputError("tolist")

    def numpy(self, *args, **kwargs):
        raise DataDependentOutputError("numpy")

    def __array__(self, *args, **kwargs):
        raise DataDependentOutputError("__array__")

    def __repr__(self, *, tensor_contents=None):
        grad = ", requires_grad=True" if self.requires_grad else ""
        return (
            f"FakeTensor(size={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={self.fake_device}{grad})"
        )

    __str__ = __repr__

    # --- dispatch ------------------------------------------------------------------------------
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Reached when an op sees fake tensors while their mode is not active: run it in the
        # mode of the first fake argument.
        mode = None
        for a in torch.utils._pytree.tree_leaves((args, kwargs)):
            if isinstance(a, FakeTensor):
                mode = a.fake_mode
                break
        return mode.dispatch(func, types, args, kwargs or {})
