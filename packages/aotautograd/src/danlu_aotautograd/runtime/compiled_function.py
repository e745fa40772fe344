"""Running compiled forward/backward graphs with eager autograd semantics.

``CompiledProgram`` is what one trace + partition + compile produced. Calling it:

1. training (joint): an ``autograd.Function`` runs the compiled forward, keeps the values the
   partition chose to save, and runs the compiled backward when autograd asks;
   inference: the compiled forward-only graph runs, nothing is saved;
2. new values of inputs the program wrote to are copied into the caller's tensors;
3. user outputs are rebuilt: graph outputs, inputs, constants, and views of them replayed
   outside the Function, so aliasing (and gradient flow through it) matches eager.

Dynamic shapes: sizes saved for backward are plain ints between the two graphs; view steps
replayed on outputs that take symbolic sizes get them evaluated for this call's inputs
(``binding``: symbol -> value, from the guard check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx as fx
from torch.utils._pytree import tree_map, tree_unflatten

from danlu_aotautograd.joint import TracedProgram
from danlu_aotautograd.partition.graph_split import Partition
from danlu_aotautograd.runtime.boxed import call_compiled


@dataclass
class CompiledProgram:
    program: TracedProgram
    forward: Callable  # compiled forward (training) or inference graph
    backward: Callable | None
    partition: Partition | None
    forward_graph: fx.GraphModule
    timings: dict = field(default_factory=dict)
    # positions (in flat_args) of inputs traced as negative or conjugate views: resolved
    # before the graphs read them (capture's guards keep the views' bits the same per call)
    lazy_inputs: tuple = ()
    # the backward was compiled without checking its saved values' layouts (aotautograd
    # promised the strides the forward reported): a saved-tensor hook that changes them is
    # undone before the backward runs
    saved_layouts_promised: bool = False

    def __call__(
        self, flat_args: list, binding: dict | None = None, all_tensors: bool = False
    ) -> Any:
        """``all_tensors``: the caller knows ``flat_args`` holds only tensors (the guarded
        path: a filter over ResNet-50's 322 inputs took about 20 us of a 350 us call)."""
        prog = self.program
        tensors = (
            flat_args if all_tensors else [a for a in flat_args if isinstance(a, torch.Tensor)]
        )
        if self.lazy_inputs:
            resolved = resolve_lazy_views(flat_args, self.lazy_inputs)
            args = (
                prog.graph_args(resolved)
                if prog.int_inputs
                else [a for a in resolved if isinstance(a, torch.Tensor)]
            )
        else:
            args = prog.graph_args(flat_args) if prog.int_inputs else tensors
        if prog.joint:
            fw_outs = _CompiledFunction.apply(self, *args)
        else:
            with torch.no_grad():
                fw_outs = _as_list(call_compiled(self.forward, list(args)))
        roots = fw_outs[: prog.num_roots]
        if prog.written_inputs:
            with torch.no_grad():
                write_back([tensors[i] for i in prog.written_inputs], fw_outs[prog.num_roots :])
        flat_out = []
        for slot in prog.slots:
            if slot.kind == "root":
                value = roots[slot.index]
            elif slot.kind == "input":
                value = tensors[slot.index]
            else:
                value = slot.value
            for step in slot.chain:
                if binding is not None:
                    step = concrete_step(step, binding)
                value = step.apply(value)
            if slot.detach and value.requires_grad:
                value = value.detach()
            flat_out.append(value)
        return tree_unflatten(flat_out, prog.out_spec)


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def lazy_view_positions(flat_args: list) -> tuple:
    """Positions of negative or conjugate views: their sign or conjugation is pending in a
    dispatch key, and generated kernels read storage, so they run on resolved copies."""
    return tuple(
        i
        for i, a in enumerate(flat_args)
        if isinstance(a, torch.Tensor) and (a.is_neg() or a.is_conj())
    )


def resolve_lazy_views(flat_args: list, positions: tuple) -> list:
    out = list(flat_args)
    for i in positions:
        out[i] = out[i].resolve_neg().resolve_conj()
    return out


def _same_memory(target, value) -> bool:
    """``value`` is ``target``'s own memory, element for element (the compiler wrote the
    new value in place)."""
    return (
        isinstance(value, torch.Tensor)
        and value.data_ptr() == target.data_ptr()
        and value.stride() == target.stride()
        and value.shape == target.shape
        and value.dtype == target.dtype
    )


def storage_address(t: torch.Tensor) -> int:
    """The address of ``t``'s storage, from the tensor alone. ``t.untyped_storage()`` would
    make a Python storage object that then lives as long as the storage: for every value a
    training forward saves, a new object the collector tracks (ResNet-50: a collection every
    step). An empty tensor's ``data_ptr()`` is 0 wherever it points: those (rare) ask the
    storage. (Three calls a tensor; ResNet-50's training step makes about 750.)"""
    ptr = t.data_ptr()
    if ptr == 0:
        return t.untyped_storage().data_ptr()
    return ptr - t.storage_offset() * t.element_size()


def write_back(targets: list, values: list) -> None:
    """Copy each new value into the caller's tensor the program wrote to. Batch norm writes
    three buffers per layer (ResNet-50: 159 a step); one multi-tensor copy per device and
    dtype replaces a copy launch per buffer. When any two of the tensors share memory, the
    copies run one by one, in order, as eager's in-place writes did."""
    foreach = getattr(torch, "_foreach_copy_", None)
    pairs = []
    for t, v in zip(targets, values):
        if _same_memory(t, v):  # computed into the input itself: only its version moves
            torch.autograd.graph.increment_version(t)
        else:
            pairs.append((t, v))
    if len(pairs) < len(targets):
        targets, values = [t for t, _ in pairs], [v for _, v in pairs]
    tensors = [x for pair in zip(targets, values) for x in pair if isinstance(x, torch.Tensor)]
    storages = {storage_address(x) for x in tensors}
    if foreach is None or len(targets) < 2 or len(storages) != len(tensors):
        for t, v in zip(targets, values):
            t.copy_(v)
        return
    groups: dict = {}
    for t, v in zip(targets, values):
        same_kind = (
            isinstance(v, torch.Tensor)
            and t.dtype == v.dtype
            and t.device == v.device
            and t.shape == v.shape
        )
        if same_kind:
            groups.setdefault((t.device, t.dtype), []).append((t, v))
        else:  # a Python number or a broadcast/cast copy: copy_ does the conversion
            t.copy_(v)
    for pairs in groups.values():
        foreach([t for t, _ in pairs], [v for _, v in pairs])


def concrete_value(x, binding: dict):
    """A symbolic size's value for this call (``binding``: symbol -> int)."""
    if not isinstance(x, _SYM_TYPES):
        return x
    from danlu_primtorch.symbolic import sym_expr

    v = sym_expr(x).xreplace(binding)
    if isinstance(x, torch.SymBool):
        return bool(v)
    return int(v) if isinstance(x, torch.SymInt) else float(v)


def concrete_step(step, binding: dict):
    args, kwargs = tree_map(lambda a: concrete_value(a, binding), (step.args, step.kwargs))
    return replace(step, args=tuple(args), kwargs=dict(kwargs))


def _as_list(out) -> list:
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def _keeps_graph() -> bool:
    """Whether the running backward was asked to keep the graph (``retain_graph=True``);
    True where torch cannot say, which only costs memory."""
    query = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    return True if query is None else bool(query())


def _saved_tensor_hooks_active() -> bool:
    """Whether ``torch.autograd.graph.saved_tensors_hooks`` (or ``save_on_cpu``) is on: its
    unpack may hand the backward a tensor with other strides. True where torch cannot say."""
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    return True if top is None else top(False) is not None


def _clone_keeping_layout(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with its sizes and strides (the backward may have been promised them).
    ``clone`` keeps the strides of a dense tensor only; a strided or overlapping view (a
    slice of a written buffer) is copied as the storage span it covers, viewed the same way."""
    copy = t.clone()
    if copy.stride() == t.stride() or t.numel() == 0:
        return copy
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    segment = t.as_strided((span,), (1,), t.storage_offset()).clone()
    return segment.as_strided(t.shape, t.stride(), 0)


def _with_layouts(tensors, layouts):
    """``tensors`` in the (sizes, strides) they had when saved (None: as they are)."""
    if layouts is None:
        return tensors
    out = []
    for t, (size, stride) in zip(tensors, layouts):
        if t.shape != size or t.stride() != stride:
            copy = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
            t = copy.copy_(t)
        out.append(t)
    return out


def _tangent(grad, meta):
    """The backward's tangent for one differentiable output: its gradient, contiguous, or
    zeros where no gradient reached it (``meta``: the output's shape, dtype and device)."""
    if grad is not None:
        return grad.contiguous()
    if meta is None:  # not a tensor output
        return None
    shape, dtype, device = meta
    return torch.zeros(shape, dtype=dtype, device=device)


class _CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, compiled: CompiledProgram, *args):
        prog = compiled.program
        outs = _as_list(call_compiled(compiled.forward, list(args)))
        n = prog.num_fw_outputs
        fw_outs, saved = outs[:n], outs[n:]
        if prog.written_inputs:
            # the caller's tensor changes after this call; backward must see the old value
            written = {storage_address(args[i]) for i in prog.written_inputs}
            saved = [
                _clone_keeping_layout(s)
                if isinstance(s, torch.Tensor) and storage_address(s) in written
                else s
                for s in saved
            ]
        # Outputs and inputs go through save_for_backward (no reference cycle through the
        # autograd graph, version checks). Intermediates are kept in a plain list the backward
        # takes over, so a boxed backward can free each one right after its last use.
        keep = {id(o) for o in fw_outs} | {id(a) for a in args if isinstance(a, torch.Tensor)}
        kept = [isinstance(s, torch.Tensor) and id(s) in keep for s in saved]
        ctx.save_for_backward(*[s for s, k in zip(saved, kept) if k])
        ctx.intermediates = [s for s, k in zip(saved, kept) if not k]
        ctx.from_saved = kept
        ctx.kept_layouts = (
            [(s.shape, s.stride()) for s, k in zip(saved, kept) if k]
            if compiled.saved_layouts_promised and _saved_tensor_hooks_active()
            else None
        )
        ctx.compiled = compiled
        ctx.mark_non_differentiable(
            *[o for o, d in zip(fw_outs, prog.fw_differentiable) if not d and torch.is_tensor(o)]
        )
        # autograd would otherwise hand the backward a zeros tensor for every output that got
        # no gradient, the non-differentiable ones included: batch norm's updated running
        # statistics (ResNet-50: 159 allocations and fill launches a step, for values the
        # backward never reads). Only a differentiable output left without a gradient needs
        # zeros, made in backward from what is kept here.
        ctx.set_materialize_grads(False)
        ctx.out_meta = [
            (o.shape, o.dtype, o.device) if d and torch.is_tensor(o) else None
            for o, d in zip(fw_outs, prog.fw_differentiable)
        ]
        return tuple(fw_outs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "danlu_aotautograd: double backward (create_graph=True through a compiled "
                "function) is not supported"
            )
        compiled = ctx.compiled
        prog = compiled.program
        tangents = [
            _tangent(g, meta)
            for g, d, meta in zip(grad_outputs, prog.fw_differentiable, ctx.out_meta)
            if d
        ]
        kept = iter(_with_layouts(ctx.saved_tensors, ctx.kept_layouts))
        intermediates = iter(ctx.intermediates)
        if not _keeps_graph():  # retain_graph=True: a second backward needs them again
            ctx.intermediates = None
        bw_args = [next(kept) if k else next(intermediates) for k in ctx.from_saved]
        del kept, intermediates
        bw_args.extend(tangents)
        del tangents, grad_outputs
        grads = _as_list(call_compiled(compiled.backward, bw_args))
        result: list = [None] * (prog.num_inputs + len(prog.int_inputs))
        it = iter(grads)
        for i, rg in enumerate(prog.input_requires_grad):
            if rg:
                result[i] = next(it)
        return (None, *result)
