"""``compile_fx_triton``: the Triton path of ``compile_fx`` whatever the inputs' device.

For tests: CPU tensors under ``TRITON_INTERPRET=1`` run the same wrapper and kernels a CUDA
graph gets (``compile_fx`` itself takes this path for CPU graphs only with
``DANLU_INDUCTOR_TRITON_ON_CPU=1``).
"""

from __future__ import annotations

import torch

from danlu_inductor.codegen.triton.compile import compile_triton
from danlu_inductor.options import validate_options


def _device_of(example_inputs) -> torch.device:
    devices = {a.device for a in example_inputs if isinstance(a, torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"inputs on several devices: {sorted(map(str, devices))}")
    return devices.pop() if devices else torch.device("cpu")


def compile_fx_triton(gm, example_inputs, options=None):
    """-> CompiledGraph (``.artifacts``, ``.launchers``, ``.wrapper_source``, ...)."""
    opts = validate_options(options)
    return compile_triton(gm, list(example_inputs), _device_of(example_inputs), opts)
