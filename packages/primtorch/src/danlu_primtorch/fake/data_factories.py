"""``torch.tensor(data, device="cuda")`` inside FakeTensorMode, on any machine.

Tensors built from Python data are created by torch's C++ binding directly on the target
device, with dispatch modes switched off, so a fake mode never sees them; without CUDA that
fails. This torch-function mode, entered together with FakeTensorMode, builds such tensors on
the CPU (which the fake mode lifts into a fake) and moves them with ``.to(device)``.

It also routes attention on symbolic CUDA fakes around ATen's size-specialising kernel choice
(``attention.py``).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from .attention import SDPA, symbolic_cuda_sdpa

_DATA_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray}


class DataFactoryDeviceMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SDPA:
            out = symbolic_cuda_sdpa(args, kwargs)
            if out is not None:
                return out
        device = kwargs.get("device")
        if func in _DATA_FACTORIES and device is not None:
            device = torch.device(device)
            if device.type not in ("cpu", "meta"):
                kwargs = dict(kwargs, device="cpu")
                requires_grad = kwargs.pop("requires_grad", False)
                out = func(*args, **kwargs).to(device)
                return out.requires_grad_(True) if requires_grad else out
        return func(*args, **kwargs)
