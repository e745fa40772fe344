"""CPU scalars in a CUDA graph become scalars on the graph's device.

Eager mixes a 0-dim CPU tensor into CUDA ops as a number. Programs make them without meaning
to: ``mask[a:b] = count`` with a Python int records ``fill.Tensor(slice, <0-dim CPU
constant>)`` (shifted-window attention builds its mask so), and decompositions write
``scalar_tensor(0.0, device="cpu")``. Such a graph holds tensors on two devices, which
inductor runs eagerly as a whole. Here every 0-dim CPU value that only feeds the graph's
computation (not an output) is rebuilt on the CUDA device as ``scalar_tensor``: a constant by
its value (constants in an ATen graph are values the program made while tracing; tensors the
program reads from outside are graph inputs), a ``scalar_tensor``/``full`` factory by moving
its ``device``. The results are the same numbers with the same dtype.
"""

from __future__ import annotations

import functools

import torch
from torch.utils import _pytree as pytree

aten = torch.ops.aten
_FACTORIES = {aten.scalar_tensor.default, aten.full.default}


def _cpu_scalar(val) -> bool:
    return isinstance(val, torch.Tensor) and val.dim() == 0 and val.device.type == "cpu"


def graph_devices(gm, example_inputs) -> set:
    """Devices of the inputs and of every value the graph computes."""
    devices = {x.device for x in example_inputs if isinstance(x, torch.Tensor)}
    for node in gm.graph.nodes:
        for v in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(v, torch.Tensor):
                devices.add(v.device)
    return devices


def move_cpu_scalars(gm: torch.fx.GraphModule, example_inputs) -> int:
    """Rebuild the 0-dim CPU values of a graph that otherwise runs on one CUDA device on that
    device; returns how many were moved (0 when the graph is not such a graph)."""
    devices = graph_devices(gm, example_inputs)
    cuda = {d for d in devices if d.type == "cuda"}
    if len(cuda) != 1 or not any(d.type == "cpu" for d in devices):
        return 0
    (device,) = cuda
    if any(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in example_inputs):
        return 0  # a CPU input is the program's own tensor: not ours to move
    candidates = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type == "cpu" and not _cpu_scalar(val):
            return 0  # a CPU tensor that is not a scalar: the graph really spans devices
        if not _cpu_scalar(val):
            continue
        if any(u.op == "output" for u in node.users):
            return 0  # a CPU result: the graph spans devices whatever we move
        if node.op == "get_attr":
            value = functools.reduce(getattr, node.target.split("."), gm)
            if not (isinstance(value, torch.Tensor) and _cpu_scalar(value)):
                return 0
            candidates.append((node, value))
        elif node.op == "call_function" and node.target in _FACTORIES:
            candidates.append((node, None))
        else:
            return 0  # a CPU scalar computed by another op: leave the graph as it is
    for node, value in candidates:
        moved_val = node.meta["val"].to(device)
        if value is None:
            node.update_kwarg("device", device)
            node.meta["val"] = moved_val
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(
                aten.scalar_tensor.default,
                (value.item(),),
                {"dtype": value.dtype, "device": device},
            )
        new.meta.update(node.meta)
        new.meta["val"] = moved_val
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    if candidates:
        gm.graph.lint()
        gm.recompile()
    return len(candidates)
