"""ShadowTensor: a tensor of metadata only, standing in for a real one while we trace.

It wraps a meta-device tensor (shape, dtype, strides, storage offset) and reports the real
device (with dynamic shapes the wrapped tensor is a danlu_primtorch ``FakeTensor`` whose sizes
and strides are ``torch.SymInt``s of a ``ShapeEnv``; the wrapper carries the same symbolic
sizes), so user code that asks ``x.device`` sees what it would in eager. Ops on it run on the
meta tensor. While tracing it also carries the FX node that currently holds its value and the
alias facts functionalization needs (its alias root and the view steps from that root).
Outside tracing (``tracer is None``) it is a plain fake value: ``node.meta["val"]`` and the
``example_inputs`` handed to compilers are ShadowTensors.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_map

from danlu_primtorch.fake import FakeTensor


class ShadowTensor(torch.Tensor):
    elem: torch.Tensor
    fake_device: torch.device
    tracer: Any
    node: Any
    root: ShadowTensor
    chain: tuple
    stamp: int

    @staticmethod
    def __new__(cls, elem: torch.Tensor, device, requires_grad: bool = False, tracer=None):
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=device,
            requires_grad=requires_grad,
        )
        r.elem = elem
        r.fake_device = torch.device(device)
        r.tracer = tracer
        r.node = None
        r.root = r
        r.chain = ()
        r.stamp = 0
        r.is_constant = False  # a tensor captured from outside the program: never written
        r.input_index = None  # position among the traced inputs, for roots that are inputs
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracer = None
        for a in _flat_tensors((args, kwargs)):
            if isinstance(a, ShadowTensor) and a.tracer is not None:
                tracer = a.tracer
                break
        if tracer is not None:
            return tracer.dispatch(func, args, kwargs)
        return run_fake(func, args, kwargs)

    def __repr__(self) -> str:
        return (
            f"ShadowTensor(shape={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={self.fake_device}, stride={self.stride()})"
        )


def _flat_tensors(tree):
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def to_meta(x):
    """The meta-device twin of a value: ShadowTensor -> its elem, real tensor -> empty meta copy."""
    if isinstance(x, ShadowTensor):
        return x.elem
    if isinstance(x, torch.Tensor):
        return meta_like(x)
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


def meta_like(t: torch.Tensor) -> torch.Tensor:
    """An empty meta tensor with ``t``'s shape, strides, storage offset and dtype (a
    danlu_primtorch FakeTensor with symbolic sizes is its own metadata and is returned as it
    is; a static one gets a plain meta twin, as any tensor)."""
    if isinstance(t, ShadowTensor):
        return t.elem
    if isinstance(t, FakeTensor) and t._has_symbolic_sizes_strides:
        return t
    if t.device.type == "meta":
        return t
    extent = 1 + t.storage_offset()
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            extent = 0
            break
        extent += (size - 1) * stride
    with _disable_current_modes():  # never recorded by an active tracer
        storage = torch.empty(max(extent, 0), dtype=t.dtype, device="meta")
        return storage.as_strided(t.shape, t.stride(), t.storage_offset())


def fake_of(t: torch.Tensor) -> ShadowTensor:
    """A detached fake value with ``t``'s metadata and device (real, fake or shadow input)."""
    device = t.fake_device if isinstance(t, ShadowTensor) else t.device
    return ShadowTensor(meta_like(t), device)


def result_device(args, kwargs) -> torch.device:
    """Where an op's result lives: an explicit ``device=`` wins, then the first tensor argument."""
    dev = kwargs.get("device")
    if dev is not None:
        return torch.device(dev)
    for a in _flat_tensors((args, kwargs)):
        if isinstance(a, ShadowTensor):
            return a.fake_device
    for a in _flat_tensors((args, kwargs)):
        return a.device
    return torch.device("cpu")


def run_fake(func, args, kwargs):
    """Run an op on metadata only and wrap tensor results as (untraced) ShadowTensors."""
    device = result_device(args, kwargs)
    out = func(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
    return tree_map(lambda o: ShadowTensor(o, device) if isinstance(o, torch.Tensor) else o, out)
