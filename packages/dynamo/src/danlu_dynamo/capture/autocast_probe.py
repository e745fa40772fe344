"""Autocast's dtypes for traced ops.

Fake tensors keep a ``meta`` tensor underneath, so the dispatcher's autocast layer (which
casts the inputs of CPU/CUDA tensors only) never sees them: under ``torch.autocast`` a traced
``x @ w`` had a float32 example value while the graph computes bfloat16, and the program read
the wrong ``y.dtype``. When autocast is on for a device that a fake argument lives on, the op
is run once more on *probes*: tensors that report the fake's device to the dispatcher (so
autocast casts them as it casts real tensors) and compute nothing (each op runs on meta
tensors underneath). The fake result is cast to the dtypes the probe result has.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .exc import Unsupported


class _Probe(torch.Tensor):
    @staticmethod
    def __new__(cls, meta, device):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            meta.shape,
            strides=meta.stride(),
            storage_offset=meta.storage_offset(),
            dtype=meta.dtype,
            device=device,
            requires_grad=False,
        )

    def __init__(self, meta, device):
        self.meta = meta
        self.probe_device = device

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        device = None

        def to_meta(x):
            nonlocal device
            if isinstance(x, _Probe):
                device = x.probe_device
                return x.meta
            if isinstance(x, torch.Tensor) and x.device.type != "meta":
                # a real tensor beside the probes (a constant): only its dtype and shape count
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            if isinstance(x, torch.device):
                return torch.device("meta")
            return x

        a, k = pytree.tree_map(to_meta, (args, kwargs or {}))
        if "device" in k:
            k["device"] = torch.device("meta")
        out = func(*a, **k)
        return pytree.tree_map(
            lambda t: _Probe(t, device) if isinstance(t, torch.Tensor) else t, out
        )


class _ProbeFactories(TorchDispatchMode):
    """While probing: ops that make tensors from nothing (``ones``/``empty`` inside a
    composite such as attention's math path, with the probe's device) make probes too,
    instead of real tensors a later op would mix with the probes' meta tensors. The device
    has no memory here (the CPU build has no CUDA kernels at all)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = pytree.tree_leaves((args, kwargs))
        if any(isinstance(x, _Probe) for x in leaves):
            return _Probe.__torch_dispatch__(func, types, args, kwargs)
        device = kwargs.get("device")
        if device is None or any(isinstance(x, torch.Tensor) for x in leaves):
            return func(*args, **kwargs)
        out = func(*args, **{**kwargs, "device": torch.device("meta")})
        device = torch.device(device)
        return pytree.tree_map(
            lambda t: _Probe(t, device) if isinstance(t, torch.Tensor) else t, out
        )


def _autocast_devices(args, kwargs):
    """Device types of tensor arguments for which autocast is on."""
    found = set()
    for x in pytree.tree_leaves((args, kwargs)):
        if isinstance(x, torch.Tensor):
            dev = x.device.type
            if dev in ("cpu", "cuda") and torch.is_autocast_enabled(dev):
                found.add(dev)
    return found


def _hint(v):
    if not isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return v
    hint = getattr(v.node, "hint", None)
    if hint is None:
        raise Unsupported("autocast: a symbolic size without an example value")
    return hint


def autocast_dtypes(fn, args, kwargs, result):
    """``result`` with autocast's dtypes (unchanged when autocast is off for its inputs)."""
    want = probe_dtypes(fn, args, kwargs)
    if want is None:
        return None
    have = pytree.tree_leaves(result)
    if len(want) != len(have):
        raise Unsupported("autocast: result structure differs from the probe's")
    return want


def probe_dtypes(fn, args, kwargs):
    """The dtypes (leaf order, None for non-tensors) of ``fn``'s result under the current
    autocast state, or None when autocast is off for its inputs."""
    if not torch._C._is_any_autocast_enabled() or not _autocast_devices(args, kwargs):
        return None

    def probe(x):
        # dtypes do not depend on sizes: symbolic sizes are probed at their example values
        if isinstance(x, torch.Tensor):
            shape = [_hint(s) for s in x.shape]
            stride = [_hint(s) for s in x.stride()]
            meta = torch.empty_strided(shape, stride, dtype=x.dtype, device="meta")
            return _Probe(meta, x.device)
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return _hint(x)
        return x

    try:
        p_args, p_kwargs = pytree.tree_map(probe, (args, kwargs))
        with _ProbeFactories():
            out = fn(*p_args, **p_kwargs)
    except Unsupported:
        raise
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise Unsupported(
            f"autocast: cannot tell the dtype of {getattr(fn, '__name__', fn)} "
            f"({type(e).__name__}: {first})"
        ) from e
    return [t.dtype if isinstance(t, torch.Tensor) else None for t in pytree.tree_leaves(out)]


def autocast_inputs(fn, args, kwargs, mode):
    """``(args, kwargs)`` with their floating-point fakes cast as autocast casts them for
    ``fn``, or None when that cannot be told. Fakes skip the autocast layer, so an op that
    only type-checks after autocast's casts (``conv2d`` of a bfloat16 input with a float32
    bias) fails on them as it is; autocast casts every floating-point input of such an op to
    one dtype (its lower-precision dtype, float32, or the widest), which is the dtype of the
    op's result, and the probe tells that."""
    dtypes = {d for d in (probe_dtypes(fn, args, kwargs) or ()) if d is not None}
    if len(dtypes) != 1:
        return None
    (dt,) = dtypes
    if not dt.is_floating_point:
        return None

    def cast(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dt:
            return x.to(dt)
        return x

    with mode:
        return pytree.tree_map(cast, (args, kwargs))


def cast_to(result, dtypes, mode):
    """The fake ``result`` with its tensors converted to ``dtypes`` (leaf order)."""
    leaves, spec = pytree.tree_flatten(result)
    if all(
        not isinstance(t, torch.Tensor) or d is None or t.dtype == d for t, d in zip(leaves, dtypes)
    ):
        return result
    with mode:
        leaves = [
            t.to(d) if isinstance(t, torch.Tensor) and d is not None and t.dtype != d else t
            for t, d in zip(leaves, dtypes)
        ]
    return pytree.tree_unflatten(leaves, spec)
