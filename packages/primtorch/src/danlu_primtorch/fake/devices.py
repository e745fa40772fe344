"""Which fake device an op's outputs live on, with eager's device rules.

Eager rules mirrored here: tensors of one op share a device, except that CPU 0-dim tensors mix
with any device (they act as scalars); a ``device=`` argument wins; a few ops move data between
devices on purpose (copies, ``_to_copy``) or take CPU index tensors.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_META = torch.device("meta")
_CPU = torch.device("cpu")

# Ops whose inputs may live on different devices in eager; outputs follow the first tensor.
_CROSS_DEVICE_OPS = {
    aten.copy_.default,
    aten.copy.default,
    aten._to_copy.default,
    aten.index.Tensor,
    aten.index_put_.default,
    aten.index_put.default,
    aten._index_put_impl_.default,
    aten.set_.source_Tensor,
    aten.lift_fresh.default,
    aten.lift_fresh_copy.default,
    aten._copy_from.default,
    aten._copy_from_and_resize.default,
}


def normalize_device(device) -> torch.device:
    """``"cuda"`` -> ``cuda:0`` as eager tensors report it; other devices unchanged."""
    device = torch.device(device)
    if device.type not in ("cpu", "meta") and device.index is None:
        return torch.device(device.type, 0)
    return device


def output_device(func, tensor_args, explicit_device) -> torch.device:
    """The device of ``func``'s outputs, or a RuntimeError as eager would raise.

    ``tensor_args`` are fake tensors (``fake_device`` set); ``explicit_device`` is the op's
    ``device=`` argument or None. A ``meta`` device argument on an op with tensor inputs comes
    from C++ filling ``self.options()`` (for example ``new_zeros``) and means "like self".
    """
    if explicit_device is not None and explicit_device.type != "meta":
        return normalize_device(explicit_device)
    if not tensor_args:
        return explicit_device if explicit_device is not None else _CPU
    if func in _CROSS_DEVICE_OPS:
        return tensor_args[0].fake_device
    common = None
    scalar_device = None
    for t in tensor_args:
        d = t.fake_device
        if t.dim() == 0 and d.type == "cpu":
            scalar_device = scalar_device or d
            continue
        if common is None:
            common = d
        elif d != common:
            raise RuntimeError(
                f"{func}: expected all tensors to be on the same device, but found at least "
                f"two devices, {common} and {d}"
            )
    return common or scalar_device or tensor_args[0].fake_device
