"""What the graphs aotautograd hands to a compiler promise it, in ``gm.meta``.

A compiler may rely on each promise to leave out work at run time; one that ignores them is
still correct.

- ``shape_env``: graphs with symbolic sizes carry their ShapeEnv (as danlu_primtorch's
  tracer does), so a compiler can read symbols, ranges and guards.
- ``input_layouts_fixed``: a static program is kept under its inputs' exact sizes and
  strides and called only with such inputs: True on its forward (or inference) graph, so the
  compiler may skip checking or copying their layouts. On a backward, one flag per input:
  the saved values whose strides the compiled forward reported (``fw.output_strides``), not
  the incoming gradients. Saved values of an input the program writes are copied before the
  write in their own layout (``_clone_keeping_layout``), so the promise holds for them too.
  A dynamic program's forward (or inference) graph: one flag per input, True for the tensor
  inputs traced with static sizes (its parameters and buffers), which the program's key
  holds to their exact sizes and strides as a static program's.
- ``saved_for_backward_from``: on a training step's forward, the first output that only the
  backward reads; the compiler may lay those out as it likes (channels-last around
  convolutions) and report it, and the backward is compiled for what it reports.
- ``outputs_into_inputs``: output position -> input position for the new values of the
  inputs a static program writes. The compiler may compute such a value into the input
  itself and return the input; ``write_back`` then skips the copy (batch norm's running
  statistics: three allocations and copies per layer a step).
- ``outputs_handed_over``: on an inference graph, the runtime hands every output on (to the
  caller, or copied into a written input) and keeps none: a CUDA-graph compiler may return
  its own output memory.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor


def promise_forward(program, forward: fx.GraphModule, backward: fx.GraphModule, dynamic_dims):
    """The promises of a training step's forward graph (and the backward's shape_env)."""
    _mark_shape_env(program, forward, backward)
    forward.meta["saved_for_backward_from"] = program.num_fw_outputs
    if dynamic_dims is None:
        forward.meta["input_layouts_fixed"] = True
        _offer_writes_in_place(program, forward)
    else:
        forward.meta["input_layouts_fixed"] = _static_inputs(forward, dynamic_dims)


def promise_backward(program, fw, backward: fx.GraphModule, dynamic_dims) -> list:
    """The backward's example inputs for the compiled forward ``fw`` (``_saved_layouts``),
    and its promise of the saved values' layouts where a static program knows them."""
    bw_inputs, known = _saved_layouts(fw, backward, program.num_fw_outputs)
    if dynamic_dims is None and any(known):
        backward.meta["input_layouts_fixed"] = known
    return bw_inputs


def promise_inference(program, gm: fx.GraphModule, dynamic_dims) -> None:
    """The promises of an inference graph."""
    _mark_shape_env(program, gm)
    gm.meta["outputs_handed_over"] = True
    if dynamic_dims is None:
        gm.meta["input_layouts_fixed"] = True
        _offer_writes_in_place(program, gm)
    else:
        gm.meta["input_layouts_fixed"] = _static_inputs(gm, dynamic_dims)


def _static_inputs(gm: fx.GraphModule, dynamic_dims: dict) -> list[bool]:
    """Per placeholder: a tensor input ``primals_<i>`` traced with static sizes (``i`` not in
    ``dynamic_dims``). Symbolic ints and tangents: False. A BERT encoder's symbolic graph
    checked each of its ~70 weights' layouts on every call (``ensure_layout``)."""
    flags = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        _, _, index = n.name.partition("primals_")
        flags.append(index.isdigit() and int(index) not in dynamic_dims)
    return flags


def _saved_layouts(fw, backward: fx.GraphModule, num_fw_outputs: int) -> tuple[list, list]:
    """The backward's example inputs, the saved values with the strides the compiled forward
    gives them (``fw.output_strides``, when its compiler reports them); their placeholders'
    ``meta["val"]`` follow. Also, per backward input, whether its layout is known: a saved
    value whose strides the forward reported (the tensor the compiled forward returns reaches
    the backward as it is); incoming gradients and anything unreported are not."""
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    values = [n.meta["val"] for n in placeholders]
    known = [False] * len(values)
    strides = getattr(fw, "output_strides", None)
    if not isinstance(strides, list) or backward.meta.get("shape_env") is not None:
        return values, known
    for i, stride in enumerate(strides[num_fw_outputs:]):
        if i >= len(values):
            break
        val = values[i]
        if stride is None or not isinstance(val, ShadowTensor):
            continue
        if len(stride) != val.dim() or val.storage_offset() != 0:
            continue
        known[i] = True
        if val.stride() == stride:
            continue
        elem = torch.empty_strided(val.shape, stride, dtype=val.dtype, device="meta")
        new = ShadowTensor(elem, val.device, requires_grad=val.requires_grad)
        values[i] = placeholders[i].meta["val"] = new
    return values, known


def _offer_writes_in_place(program, gm: fx.GraphModule) -> None:
    if program.written_inputs:
        gm.meta["outputs_into_inputs"] = {
            program.num_roots + j: i for j, i in enumerate(program.written_inputs)
        }


def _mark_shape_env(program, *graphs) -> None:
    if program.shape_env is not None:
        for gm in graphs:
            gm.meta["shape_env"] = program.shape_env
