"""The ATen-level tracer: records every op that reaches the dispatcher into an FX graph.

Tracing runs the program on ShadowTensors (metadata only) under a ``__torch_dispatch__`` mode,
so autograd runs above us exactly as in eager and its backward ops are recorded too. The
recorded graph is functional:

- an op that writes to an argument (``add_``, ``copy_``, ``out=`` ops, BatchNorm's running
  statistics) is recorded as its out-of-place twin, and the written tensor is rebound to the
  new node;
- a write through a view is scattered back into the view's alias root (``slice_scatter``,
  ``select_scatter``, ...), and other views of that root are regenerated from the new root
  value before their next use;
- writes to traced inputs are left for the runtime to apply (``Tracer.written_inputs``).

Decompositions (a dict ``OpOverload -> fn``) are applied as ops arrive.

Dynamic shapes: given a danlu_primtorch ``FakeTensorMode`` with a ``ShapeEnv``, the shadows
wrap symbolic fake tensors, each op's metadata is computed in that mode (branches on sizes
become the env's guards), and every symbolic size an op takes (``view(x, [s0*s1, 64])``)
becomes graph nodes computing it from the inputs (``aten.sym_size.int``, ``operator.mul``),
each with ``meta["val"]`` the ``torch.SymInt`` it stands for.
"""

from __future__ import annotations

import operator
import os
import sys
from typing import Any

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from danlu_aotautograd.errors import AotNotSupported
from danlu_aotautograd.tracing.functional_ops import (
    ViewStep,
    functional_variant,
    inverse_step,
    mutated_args,
    view_source,
)
from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor, fake_of, meta_like
from danlu_primtorch.fake import DataDependentOutputError, UnsupportedFakeOp
from danlu_primtorch.fake.conv_layout import restride_conv_output
from danlu_primtorch.tracing.symbolic_values import SYM_TYPES, SymbolicValues

aten = torch.ops.aten

_DATA_DEPENDENT = {
    aten._local_scalar_dense.default,
    aten.item.default,
    aten.nonzero.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten.allclose.default,
}


class _TraceMode(TorchDispatchMode):
    """Routes every op (also factories with no tensor argument) to the tracer."""

    def __init__(self, tracer: Tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.tracer.dispatch(func, args, kwargs or {})


_IDENTITY_VIEWS = {aten.detach.default, aten.alias.default}


def _bind(func, args, kwargs, defaults: bool = False) -> dict[str, Any]:
    bound = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif defaults and a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def _call_args(op, bound: dict[str, Any]) -> tuple[tuple, dict]:
    """Positional and keyword arguments for ``op`` taken by name from ``bound``."""
    args, kwargs = [], {}
    for a in op._schema.arguments:
        if a.name not in bound:
            continue
        if a.kwarg_only:
            kwargs[a.name] = bound[a.name]
        else:
            args.append(bound[a.name])
    return tuple(args), kwargs


_SKIP_SOURCE = (
    os.sep + "torch" + os.sep,
    os.sep + "danlu_aotautograd" + os.sep,
    os.sep + "danlu_primtorch" + os.sep,
    "<frozen ",
)


def user_source() -> str | None:
    """``file:line (function)`` of the innermost caller outside torch and danlu's tracing:
    the user's line an op came from (None inside the backward, run by autograd's engine)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not any(s in filename for s in _SKIP_SOURCE) and not filename.startswith("<"):
            return f"{os.path.basename(filename)}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return None


_PRIMS_TABLE: dict | None = None


def _prims_table() -> dict:
    global _PRIMS_TABLE
    if _PRIMS_TABLE is None:
        import danlu_primtorch

        _PRIMS_TABLE = danlu_primtorch.decomposition_table(level="prims")
    return _PRIMS_TABLE


def _symbolic_scalars_on_static_tensors(args, kwargs) -> bool:
    leaves = tree_leaves((args, kwargs))
    if not any(isinstance(x, SYM_TYPES) for x in leaves):
        return False
    return not any(isinstance(x, torch.Tensor) and x._has_symbolic_sizes_strides for x in leaves)


def is_random(func) -> bool:
    return (
        isinstance(func, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in func.tags
    )


class Tracer:
    def __init__(self, decompositions: dict | None = None, fake_mode=None):
        self.graph = fx.Graph()
        self.fake_mode = fake_mode  # a FakeTensorMode with a ShapeEnv: dynamic shapes
        self.sym_values = SymbolicValues(self.graph) if fake_mode is not None else None
        self.decompositions = dict(decompositions or {})
        self.constants: dict[str, torch.Tensor] = {}
        self._constant_shadows: dict[int, ShadowTensor] = {}
        self.inputs: list[ShadowTensor] = []
        self.mode = _TraceMode(self)
        self._stamp = 0

    # ---- values ---------------------------------------------------------------------------

    def placeholder(
        self, name: str, example: torch.Tensor, requires_grad: bool, device=None, is_input=True
    ) -> ShadowTensor:
        if device is None:
            device = example.fake_device if isinstance(example, ShadowTensor) else example.device
        elem = meta_like(example)
        t = ShadowTensor(elem, device, requires_grad=requires_grad, tracer=self)
        t.node = self.graph.placeholder(name)
        t.node.meta["val"] = ShadowTensor(elem, device)
        if is_input and self.sym_values is not None:
            self.sym_values.register_input(t.node, elem)  # sizes are read from inputs
        if is_input:
            t.input_index = len(self.inputs)
            self.inputs.append(t)
        return t

    def _constant(self, t: torch.Tensor) -> ShadowTensor:
        if t.requires_grad:
            raise AotNotSupported(
                "the program reads a tensor that requires grad but is not an input "
                f"(shape {tuple(t.shape)}); pass it as an argument or use aot_module"
            )
        shadow = self._constant_shadows.get(id(t))
        if shadow is None:
            name = f"_tensor_constant{len(self.constants)}"
            self.constants[name] = t
            shadow = ShadowTensor(meta_like(t), t.device, tracer=self)
            shadow.node = self.graph.get_attr(name)
            shadow.node.meta["val"] = fake_of(t)
            shadow.is_constant = True
            shadow.constant_value = t
            self._constant_shadows[id(t)] = shadow
        return shadow

    def node_of(self, t) -> fx.Node:
        """The node holding ``t``'s current value (regenerating a view of a written root)."""
        if not isinstance(t, ShadowTensor) or t.tracer is not self:
            if isinstance(t, ShadowTensor):
                raise AotNotSupported("a fake tensor from another trace reached this trace")
            t = self._constant(t)
        root = t.root
        if t is not root and t.stamp != root.stamp:
            node = root.node
            for step in t.chain:
                node = self._apply_step(step, node)
            t.node = node
            t.stamp = root.stamp
        return t.node

    def _as_arg(self, x):
        if isinstance(x, torch.Tensor):
            return self.node_of(x)
        return x

    # ---- recording ------------------------------------------------------------------------

    def sym_arg(self, x):
        """The graph argument for a symbolic size: the node computing it from the inputs."""
        if isinstance(x, SYM_TYPES):
            if self.sym_values is None:
                raise AotNotSupported(f"a symbolic size ({x}) reached a trace with static shapes")
            return self.sym_values.node_for(x)
        return x

    def emit(self, func, args, kwargs=None) -> fx.Node:
        """Record ``func(*args, **kwargs)`` (args hold nodes, maybe SymInts) and compute its
        fake value."""
        kwargs = kwargs or {}

        def meta_of(x):
            if isinstance(x, fx.Node):
                val = x.meta["val"]
                return val.elem if isinstance(val, ShadowTensor) else val
            if isinstance(x, torch.device):
                return torch.device("meta")
            return x

        device = kwargs.get("device")
        if device is None:
            for a in tree_leaves((args, kwargs)):
                if isinstance(a, fx.Node) and isinstance(a.meta.get("val"), ShadowTensor):
                    device = a.meta["val"].fake_device
                    break
        device = torch.device(device if device is not None else "cpu")
        try:
            if self.fake_mode is not None:
                out = self._symbolic_meta(func, tree_map(meta_of, args), tree_map(meta_of, kwargs))
            else:
                meta_args = tree_map(meta_of, args)
                out = func(*meta_args, **tree_map(meta_of, kwargs))
                if func is aten.convolution.default:
                    # the meta kernel says contiguous; eager's kernels follow a channels-last
                    # input or weight (what the compiler lays the value out as)
                    out = restride_conv_output(out, meta_args[0], meta_args[1])
        except NotImplementedError as e:
            raise AotNotSupported(
                f"{func} cannot run on metadata only (no meta kernel): {e}"
            ) from e
        except DataDependentOutputError as e:
            raise AotNotSupported(
                f"{func} has a data-dependent output size ({e}); dynamic shapes cover sizes "
                "computed from input sizes only"
            ) from e
        except UnsupportedFakeOp as e:
            raise AotNotSupported(str(e)) from e
        if self.sym_values is not None:
            args, kwargs = tree_map(self.sym_arg, (tuple(args), dict(kwargs)))
        node = self.graph.call_function(func, tuple(args), dict(kwargs))
        source = user_source()
        if source is not None:
            node.meta["source"] = source
        node.meta["val"] = tree_map(
            lambda o: ShadowTensor(o, device) if isinstance(o, torch.Tensor) else o, out
        )
        return node

    def _symbolic_meta(self, func, args, kwargs):
        """``func``'s fake result with symbolic sizes. ATen's C++ kernels turn a symbolic scalar
        argument into an int (a specialising guard, e.g. ``Eq(s1, 12)``) when no tensor
        argument has symbolic sizes (``position_ids[:, :seq_len]`` on a static buffer); such
        calls take danlu_primtorch's prims decomposition for their metadata instead, which keeps
        the size symbolic. The graph still records ``func`` itself."""
        with self.fake_mode:
            if _symbolic_scalars_on_static_tensors(args, kwargs):
                decomposition = _prims_table().get(func)
                if decomposition is not None:
                    out = decomposition(*args, **kwargs)
                    if out is not NotImplemented:
                        return out
            return func(*args, **kwargs)

    def _items(self, node: fx.Node) -> list[fx.Node | None]:
        val = node.meta["val"]
        if not isinstance(val, (list, tuple)):
            return [node]
        items = []
        for i, v in enumerate(val):
            if v is None:
                items.append(None)
                continue
            item = self.graph.call_function(operator.getitem, (node, i))
            item.meta["val"] = v
            items.append(item)
        return items

    def _apply_step(self, step: ViewStep, node: fx.Node) -> fx.Node:
        if step.func in _IDENTITY_VIEWS:
            return node
        out = self.emit(step.func, (node, *step.args), step.kwargs)
        return out if step.index is None else self._items(out)[step.index]

    def _fresh(self, t, arg_ids: set[int]):
        if not isinstance(t, ShadowTensor) or t.tracer is not self:
            return t
        if t.root is t and id(t) not in arg_ids:
            return t
        node = self.node_of(t)
        if t.root.input_index is not None or t.root.is_constant:
            node = self.emit(aten.clone.default, (node,))
        fresh = self._wrap(node)
        if t.requires_grad:
            raise AotNotSupported("a decomposition returned a tensor with autograd history")
        return fresh

    def _wrap(self, node: fx.Node) -> ShadowTensor:
        val = node.meta["val"]
        t = ShadowTensor(val.elem, val.fake_device, tracer=self)
        t.node = node
        return t

    def emit_functional(self, op, args: tuple) -> fx.Node:
        """``op(*args)`` (nodes or constants) for an op this tracer writes itself
        (functionalization's scatters and functional twins): through the decomposition table
        when it has ``op``, as ops that reach ``dispatch`` do, else as one node. A compiler
        then sees ``slice_scatter`` as the ``where`` it decomposes to, not as a library call."""
        decomp = self.decompositions.get(op)
        if decomp is not None:
            shadows = [self._wrap(a) if isinstance(a, fx.Node) else a for a in args]
            with self.mode:
                out = decomp(*shadows)
            if out is not NotImplemented and isinstance(out, ShadowTensor):
                return self.node_of(out)
        return self.emit(op, args)

    # ---- dispatch -------------------------------------------------------------------------

    def dispatch(self, func, args, kwargs):
        if func in _DATA_DEPENDENT:
            raise AotNotSupported(
                f"{func} needs tensor data while tracing (data-dependent control flow or "
                "data-dependent size); tracing sees metadata only"
            )
        decomp = self.decompositions.get(func)
        if decomp is not None:
            with self.mode:
                out = decomp(*args, **kwargs)
            if out is not NotImplemented:
                if func.is_view or mutated_args(func):
                    return out
                # The op's results are new tensors in eager, even if the decomposition built
                # them as views: cut the alias so writes and outputs treat them as fresh.
                arg_ids = {id(a) for a in tree_leaves((args, kwargs))}
                return tree_map(lambda t: self._fresh(t, arg_ids), out)
        if func is aten.lift_fresh.default:
            fresh = self._wrap(self.node_of(args[0]))  # a new tensor the program owns
            return fresh
        if func in _IDENTITY_VIEWS:
            # detach/alias: same value, so no node; alias facts still recorded for writes.
            base = args[0]
            if not isinstance(base, ShadowTensor) or base.tracer is not self:
                base = self._constant(base)
            t = self._wrap(self.node_of(base))
            t.root, t.stamp = base.root, base.root.stamp
            t.chain = base.chain + (ViewStep(func, (), {}, None),)
            return t
        if func is aten.resize_.default and list(args[0].shape) == list(args[1]):
            return args[0]
        if func is aten.native_batch_norm.default and args[5] and args[3] is not None:
            return self._native_batch_norm_training(args, kwargs)
        if torch.Tag.inplace_view in func.tags:  # t_, squeeze_, as_strided_: layout changes
            if _inplace_view_is_noop(func, args, kwargs):
                return args[0]
            raise AotNotSupported(f"{func} changes a tensor's shape or strides in place")
        if mutated_args(func):
            return self._functionalize(func, args, kwargs)
        node = self.emit(func, tree_map(self._as_arg, args), tree_map(self._as_arg, kwargs))
        val = node.meta["val"]
        if not any(isinstance(v, torch.Tensor) for v in tree_leaves(val)):
            self.graph.erase_node(node)
            return tree_map(lambda v: v.elem if isinstance(v, ShadowTensor) else v, val)
        bound = _bind(func, args, kwargs)
        items = self._items(node)
        results = []
        for i, item in enumerate(items):
            if item is None:
                results.append(None)
                continue
            if not isinstance(item.meta["val"], ShadowTensor):
                # A number among tensor results (flash attention's max sequence lengths): the
                # value itself, as eager returns it.
                results.append(item.meta["val"])
                self.graph.erase_node(item)
                continue
            t = self._wrap(item)
            src_name = view_source(func, i)
            if src_name is not None:
                base = bound[src_name]
                if not isinstance(base, ShadowTensor) or base.tracer is not self:
                    base = self._constant(base)
                index = i if isinstance(val, (list, tuple)) else None
                t.root = base.root
                t.chain = base.chain + (ViewStep(func, tuple(args[1:]), dict(kwargs), index),)
                t.stamp = base.root.stamp
            results.append(t)
        if isinstance(val, (list, tuple)):
            return type(val)(results) if isinstance(val, tuple) else results
        return results[0]

    def _functionalize(self, func, args, kwargs):
        op, kind = functional_variant(func)
        bound = _bind(func, args, kwargs)
        written_names = mutated_args(func)
        targets: list = []
        for name in written_names:
            v = bound.get(name)
            if v is None:
                continue
            targets.extend(v if isinstance(v, (list, tuple)) else [v])
        full = _bind(func, args, kwargs, defaults=True)
        if func is aten.bernoulli_.float:
            full.setdefault("p", 0.5)
        if kind == "out":
            full = {k: v for k, v in full.items() if k not in written_names}
        op_args, op_kwargs = _call_args(op, full)
        op_args, op_kwargs = tree_map(self._as_arg, op_args), tree_map(self._as_arg, op_kwargs)
        if kind != "extra" and len(targets) == 1 and not op_kwargs:
            node = self.emit_functional(op, tuple(op_args))  # fill_ -> fill -> its decomposition
        else:
            node = self.emit(op, op_args, op_kwargs)
        items = self._items(node)
        n_ret = len(func._schema.returns)
        if kind == "extra":
            regular, new_values = items[:n_ret], items[n_ret:]
        else:
            regular, new_values = [], items
        if len(new_values) != len(targets):
            raise AotNotSupported(f"cannot functionalize {func}: result count mismatch")
        for t, new in zip(targets, new_values):
            self.write(t, new)
        rets = []
        for j, r in enumerate(func._schema.returns):
            info = r.alias_info
            if info is not None and info.is_write:
                src = next(
                    a.name
                    for a in func._schema.arguments
                    if a.alias_info and a.alias_info.before_set & info.before_set
                )
                rets.append(bound[src])
            elif kind == "extra":
                rets.append(None if regular[j] is None else self._wrap(regular[j]))
            else:
                raise AotNotSupported(f"cannot functionalize {func}: unexpected result")
        if not rets:
            return None
        return rets[0] if len(rets) == 1 else tuple(rets)

    def _native_batch_norm_training(self, args, kwargs):
        """``native_batch_norm`` in training updates the running statistics in place although
        its schema does not say so: record the functional op and write the new statistics."""
        full = _bind(aten.native_batch_norm.default, args, kwargs, defaults=True)
        op = aten._native_batch_norm_legit_functional.default
        op_args, op_kwargs = _call_args(op, full)
        node = self.emit(op, tree_map(self._as_arg, op_args), tree_map(self._as_arg, op_kwargs))
        out, save_mean, save_rstd, new_mean, new_var = self._items(node)
        self.write(full["running_mean"], new_mean)
        self.write(full["running_var"], new_var)
        return self._wrap(out), self._wrap(save_mean), self._wrap(save_rstd)

    def write(self, t, new: fx.Node) -> None:
        """Record that ``t`` now holds ``new`` (and so does the matching part of its root)."""
        if not isinstance(t, ShadowTensor):
            t = self._constant(t)
        if t.tracer is not self:
            raise AotNotSupported("the program writes to a fake tensor from another trace")
        root = t.root
        if root.is_constant:
            raise AotNotSupported(
                "the program writes to a tensor captured from outside (not an input); "
                "pass it as an argument or register it as a buffer and use aot_module"
            )
        new_val = new.meta["val"]
        if list(new_val.shape) != list(t.shape):
            raise AotNotSupported(f"write changes shape {tuple(t.shape)} -> {tuple(new_val.shape)}")
        if new_val.dtype != t.dtype:
            new = self.emit(aten._to_copy.default, (new,), {"dtype": t.dtype})
        if t is not root:
            bases = [root.node]
            for step in t.chain[:-1]:
                bases.append(self._apply_step(step, bases[-1]))
            value = new
            for step, base in reversed(list(zip(t.chain, bases))):
                kind, op, extra = inverse_step(step, base.meta["val"].elem)
                if kind == "scatter":
                    value = self.emit_functional(op, (base, value, *extra))
                elif kind == "unary":
                    value = self.emit(op, (value, *extra))
            root.node = value
        self._stamp += 1
        root.stamp = self._stamp
        t.node = new
        t.stamp = root.stamp

    def graph_module(self) -> fx.GraphModule:
        root = torch.nn.Module()
        for name, value in self.constants.items():
            root.register_buffer(name, value, persistent=False)
        return fx.GraphModule(root, self.graph)


def _inplace_view_is_noop(func, args, kwargs) -> bool:
    """An in-place view op that leaves every element where it was: same sizes and offset,
    strides differing only where a size is 0 or 1 (ATen's pooling to 1x1 restrides its result
    to channels-last with ``as_strided_``). Such a call changes nothing a program can read."""
    t = args[0]
    if not isinstance(t, torch.Tensor):
        return False
    probe = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    try:
        func(probe, *args[1:], **kwargs)
    except Exception:  # a call the meta kernel rejects is not ours to judge
        return False
    if probe.shape != t.shape or probe.storage_offset() != t.storage_offset():
        return False
    return all(n <= 1 or a == b for n, a, b in zip(t.shape, t.stride(), probe.stride()))
