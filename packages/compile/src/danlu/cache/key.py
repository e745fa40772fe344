"""The key of a captured graph in the graph cache: everything its compiled form depends on.

Components (each a short string, compared one by one to explain a miss):

- ``graph``: the captured FX graph's code (ops, their order, constants written in it);
- ``inputs``: each example input's type, dtype, shape, strides, storage offset, device,
  ``requires_grad`` and negative/conjugate view bits (a non-tensor: its type and value);
- ``constants``: the values of tensors the graph module holds;
- ``backend``: the backend's name and settings (mode, options);
- ``state``: grad mode, autocast (per device, with its dtype), default dtype;
- ``versions``: a hash of danlu's own sources (a development install changes code under one
  version number), danlu's packages, torch, triton, Python, the machine, the GPU's arch.

A graph with symbolic sizes has no key (``None``): only static graphs are cached; nor has one
compiled while a TorchFunctionMode or TorchDispatchMode is active (it changes the trace).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import sys

import torch

from danlu.cache.store import raw_bytes

_DISTS = ("danlu", "danlu-primtorch", "danlu-dynamo", "danlu-aotautograd", "danlu-inductor")


def _code_fingerprint() -> str:
    """A hash of danlu's own Python sources: a development install changes code under the
    same version number, and an entry compiled by other code must not be served."""
    import importlib

    h = hashlib.sha256()
    for name in ("danlu", "danlu_primtorch", "danlu_dynamo", "danlu_aotautograd", "danlu_inductor"):
        try:
            root = os.path.dirname(importlib.import_module(name).__file__)
        except ImportError:
            continue
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".py", ".c", ".h")):
                    path = os.path.join(folder, f)
                    h.update(os.path.relpath(path, root).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
    return h.hexdigest()[:16]


def _versions() -> str:
    parts = [f"danlu-code={_code_fingerprint()}"]
    for name in (*_DISTS, "torch", "triton"):
        try:
            parts.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{name}=-")
    parts.append(f"python={sys.version_info[0]}.{sys.version_info[1]}")
    parts.append(f"machine={platform.machine()}")
    return " ".join(parts)


_VERSIONS: list = []


def versions() -> str:
    if not _VERSIONS:
        _VERSIONS.append(_versions())
    return _VERSIONS[0]


def _symbolic(v) -> bool:
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    return isinstance(v, torch.Tensor) and v._has_symbolic_sizes_strides


def _describe_input(v) -> str:
    if isinstance(v, torch.Tensor):
        # a negative or conjugate view's sign/conjugation is pending in a dispatch key:
        # named so that it never shares an entry with a plain tensor
        lazy = (",neg" if v.is_neg() else "") + (",conj" if v.is_conj() else "")
        return (
            f"{type(v).__name__}({v.dtype},{tuple(v.shape)},{tuple(v.stride())},"
            f"{v.storage_offset()},{v.device},{v.requires_grad}{lazy})"
        )
    return f"{type(v).__name__}({v!r})"


def _digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:24]


def _constants(gm) -> str:
    h = hashlib.sha256()
    for name, t in sorted([*gm.named_parameters(), *gm.named_buffers()], key=lambda kv: kv[0]):
        h.update(name.encode())
        h.update(_describe_input(t).encode())
        h.update(raw_bytes(t.detach().to("cpu").contiguous()))
    return h.hexdigest()[:24]


# Environment settings that change the code danlu generates for the same graph.
CODEGEN_ENV = (
    "DANLU_CONV_CHANNELS_LAST",
    "DANLU_CPP_OPT",
    "DANLU_CPP_PIECES",
    "DANLU_CPP_TABLES",
    "DANLU_CPP_VERTICAL",
    "DANLU_CPU_WORKSPACE",
    "DANLU_CXX",
    "DANLU_INDUCTOR_TRITON_ON_CPU",
    "DANLU_KEEP_LIBRARY_OPERANDS",
    "TRITON_INTERPRET",
)


def _state(example_inputs) -> str:
    devices = sorted({x.device.type for x in example_inputs if isinstance(x, torch.Tensor)})
    parts = [
        f"grad={torch.is_grad_enabled()}",
        f"default_dtype={torch.get_default_dtype()}",
        f"deterministic={torch.are_deterministic_algorithms_enabled()}",
    ]
    for dev in ("cpu", "cuda"):
        if torch.is_autocast_enabled(dev):
            parts.append(f"autocast_{dev}={torch.get_autocast_dtype(dev)}")
    parts += [f"{k}={os.environ[k]}" for k in CODEGEN_ENV if os.environ.get(k)]
    if "cuda" in devices and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        parts.append(f"sm_{major}{minor}")
    return " ".join(parts)


def graph_key(gm, example_inputs, backend: str, settings: dict) -> tuple[str, dict] | None:
    """``(digest, components)`` for a captured graph, or None when it has symbolic sizes."""
    if any(_symbolic(x) for x in example_inputs) or any(
        _symbolic(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"
    ):
        return None
    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        return None  # a mode active while aotautograd traces changes what it records
    components = {
        "graph": _digest(gm.code),
        "inputs": _digest(";".join(map(_describe_input, example_inputs))),
        "constants": _constants(gm),
        "backend": f"{backend} {json.dumps(settings or {}, sort_keys=True, default=str)}",
        "state": _state(example_inputs),
        "versions": versions(),
    }
    digest = _digest(json.dumps(components, sort_keys=True))
    return digest, components
