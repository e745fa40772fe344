"""Library calls: extern kernels (mm, bmm, addmm, convolution, attention) and fallbacks.

Both become ``ExternKernel`` nodes: the generated wrapper calls the ATen op on realized
buffers (or strided views of them). The difference is only in how we count them: extern
kernels are the plan (a library kernel beats a loop nest), fallbacks are ops not lowered yet.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.ir.layout import FixedLayout
from danlu_inductor.ir.nodes import (
    ExternKernel,
    MultiOutput,
    ReinterpretView,
    StorageBox,
    View,
    as_strided_view,
    current_graph,
    realize_input,
)
from danlu_inductor.ir.symbols import to_int
from danlu_inductor.lowering.registry import NotLowered, aten, is_node, register
from danlu_primtorch.fake.conv_layout import restride_conv_output

EXTERN_OPS = (
    aten.mm.default,
    aten.bmm.default,
    aten.addmm.default,
    aten.baddbmm.default,
    aten.convolution.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
)


def _meta_arg(a):
    if isinstance(a, (ReinterpretView,)) or hasattr(a, "layout"):
        lay = a.layout
        return torch.empty_strided(
            [to_int(s) for s in lay.size],
            [to_int(s) for s in lay.stride],
            dtype=lay.dtype,
            device="meta",
        )
    return a


def _mutated_args(op, args, kwargs):
    schema = getattr(op, "_schema", None)
    if schema is None:
        return []
    out = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for leaf in pytree.tree_leaves(value):
                if isinstance(leaf, ReinterpretView):
                    out.append(leaf.buffer.get_name())
                elif hasattr(leaf, "get_name"):
                    out.append(leaf.get_name())
    return out


def _check_written_views(op, args, kwargs):
    """An argument the op writes in place must reach it as the buffer itself or a strided
    view of it: a copy would take the write and the result would be lost."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        for leaf in pytree.tree_leaves(value):
            if not isinstance(leaf, View) or isinstance(leaf, ReinterpretView):
                continue
            box = leaf.storage_box()
            if isinstance(box, StorageBox) and not box.is_realized():
                box.realize()
            if as_strided_view(leaf) is None:
                raise NotLowered(f"{op} writes into a view that is not strided: {arg.name}")


# Ops whose library kernels return auxiliary outputs of other shapes than their meta kernels
# describe (embedding_bag's offset2bag / bag_size / max_indices on the CPU): the memory plan
# would be wrong, so a graph holding one runs eagerly.
_META_DIFFERS = {
    aten._embedding_bag.default,
    aten._embedding_bag_forward_only.default,
    # the backward takes those outputs as inputs
    aten._embedding_bag_backward.default,
    aten._embedding_bag_dense_backward.default,
    aten._embedding_bag_per_sample_weights_backward.default,
}


def make_extern(op, args, kwargs, kind: str, meta_val=None):
    """Realize the tensor arguments, call ``op`` at run time, describe its outputs."""
    graph = current_graph()
    if op in _META_DIFFERS:
        raise NotLowered(f"{op}: its library kernel's outputs differ from its meta description")

    def realize(a):
        if is_node(a):
            return realize_input(a)
        return a

    _check_written_views(op, args, kwargs)
    rargs = pytree.tree_map(realize, list(args))
    rkwargs = pytree.tree_map(realize, dict(kwargs))
    node = graph.current_node
    from_trace = False
    if meta_val is None and graph.shape_env is not None and node is not None:
        # symbolic sizes: the trace already describes the outputs
        val = node.meta.get("val")
        # GPU attention ops also return numbers (sequence lengths, RNG state): taken as traced
        if val is not None and all(
            v is None or isinstance(v, (torch.Tensor, int, float, bool, torch.SymInt))
            for v in pytree.tree_leaves(val)
        ):
            meta_val, from_trace = val, True
    if meta_val is None:
        margs = pytree.tree_map(_meta_arg, rargs)
        try:
            meta_val = op(*margs, **pytree.tree_map(_meta_arg, rkwargs))
        except Exception as e:  # no meta kernel: we cannot describe the outputs
            raise NotLowered(f"no output metadata for {op}: {e}") from e
        if op is aten.convolution.default:
            # the library writes channels-last for channels-last operands; the meta kernel
            # always says contiguous
            meta_val = restride_conv_output(meta_val, margs[0], margs[1])
    mutates = _mutated_args(op, rargs, rkwargs)

    def layout_of(t):
        # the trace's values carry the graph's device; a meta run gives "meta" unless the op
        # made a real tensor somewhere we don't plan memory for
        if not from_trace and t.device.type not in ("cpu", "meta"):
            raise NotLowered(f"extern output on {t.device} ({op})")
        # offset 0: kernels address the returned tensor from its data pointer, which already
        # includes a view's offset (the offset itself is kept as ``storage_offset``)
        return FixedLayout(t.dtype, graph.to_exprs(t.shape), graph.to_exprs(t.stride()), 0)

    def buffer(cls, *fields, val):
        out = cls(None, layout_of(val), *fields)
        out.storage_offset = graph.to_expr(val.storage_offset())
        graph.register_buffer(out)
        return StorageBox(out)

    if isinstance(meta_val, torch.Tensor):
        return buffer(ExternKernel, op, rargs, rkwargs, kind, mutates, val=meta_val)
    node = ExternKernel(None, None, op, rargs, rkwargs, kind, mutates)
    graph.register_buffer(node)

    def unpack(val, path):
        if isinstance(val, torch.Tensor):
            return buffer(MultiOutput, node, path, val=val)
        if isinstance(val, (list, tuple)):
            return type(val)(unpack(v, (*path, i)) for i, v in enumerate(val))
        return val

    return unpack(meta_val, ())


def _extern(op):
    @register(op)
    def lower(*args, **kwargs):
        for a in pytree.tree_leaves((args, kwargs)):
            if is_node(a) and a.get_dtype().is_complex:
                raise NotLowered("complex")
        return make_extern(op, args, kwargs, "extern")

    return lower


for _op in EXTERN_OPS:
    if _op not in (aten.convolution.default, aten.convolution_backward.default):
        _extern(_op)  # convolutions: lowering/convolution.py (they choose their layouts)
