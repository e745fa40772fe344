"""Tracing a program into one graph: the joint forward+backward graph, or a forward-only one.

The joint graph's placeholders are ``primals_*`` (every tensor input, parameters and buffers
included) then ``tangents_*`` (one per differentiable forward output). Its outputs are the
forward outputs followed by one gradient per input that requires grad (``None`` where the
input gets no gradient). The forward outputs are, in order: the program's outputs that own
their memory ("roots"), then the new values of inputs the program writes to.

How each user-visible output is rebuilt from those lives in ``OutputPlan``: outputs that are
views of an input or of another output are replayed as views at runtime, so callers see the
same aliasing as in eager.

Dynamic shapes (``dynamic_dims``): the chosen sizes of the inputs become symbols of a fresh
danlu_primtorch ``ShapeEnv`` (input ``i``'s sizes and strides are read from the sources
``primals_i.size(d)`` / ``primals_i.stride(d)``), the trace runs on symbolic fake tensors, and
the env's guards and input checks say for which inputs the graph is valid.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from danlu_aotautograd.errors import AotNotSupported
from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor, meta_like
from danlu_aotautograd.tracing.tracer import Tracer, is_random
from danlu_primtorch.symbolic.composites import SymbolicCompositeMode


@dataclass
class OutputSlot:
    """Where one flat user output comes from.

    kind ``"const"``: ``value`` (a tensor captured from outside, or a non-tensor); ``"root"``: forward output ``index``; ``"input"``:
    tensor input ``index``; then the view ``chain`` is replayed on it.
    """

    kind: str
    index: int = 0
    chain: tuple = ()
    value: Any = None
    # the traced output did not require grad while its base may (``x.detach()``, which a
    # decomposition table may record as ``alias``): detach the replayed view
    detach: bool = False


@dataclass
class TracedProgram:
    graph_module: fx.GraphModule
    joint: bool
    num_inputs: int
    input_requires_grad: list[bool]
    num_roots: int
    written_inputs: list[int]
    root_differentiable: list[bool]
    slots: list[OutputSlot]
    out_spec: Any
    trace_seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    shape_env: Any = None  # dynamic shapes: the ShapeEnv holding the symbols and guards
    dynamic_inputs: dict = field(default_factory=dict)  # tensor index -> symbolic dims
    # flat positions of int inputs traced as symbols: graph inputs ``primals_int_j``, after
    # the tensors (the compiled graphs take the tensor inputs, then these ints)
    int_inputs: list = field(default_factory=list)

    def graph_args(self, flat_args: list) -> list:
        """The compiled forward's inputs for these flat inputs: tensors, then symbolic ints."""
        args = [a for a in flat_args if isinstance(a, torch.Tensor)]
        args.extend(flat_args[k] for k in self.int_inputs)
        return args

    @property
    def dynamic(self) -> bool:
        return self.shape_env is not None

    @property
    def num_fw_outputs(self) -> int:
        return self.num_roots + len(self.written_inputs)

    @property
    def fw_differentiable(self) -> list[bool]:
        return self.root_differentiable + [False] * len(self.written_inputs)


def _differentiable(t: torch.Tensor) -> bool:
    return t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)


def _contiguous_strides(shape) -> list:
    strides, acc = [], 1
    for n in reversed(list(shape)):
        strides.append(acc)
        acc = acc * n
    return strides[::-1]


def symbolic_inputs(flat_args: list, dynamic_dims: dict):
    """Fake tensors for the tensor entries of ``flat_args`` (``dynamic_dims``: tensor index ->
    dims made symbolic), in a new FakeTensorMode with a new ShapeEnv."""
    from danlu_primtorch.fake import FakeTensorMode
    from danlu_primtorch.symbolic import ShapeEnv

    env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(shape_env=env)
    # Every fake here lives on meta: a factory called with device="meta" (what the tracer
    # passes for torch.arange(n, device=...)) must stay there, not take the mode's default
    # "last device" (cpu), or it meets the meta fakes as a device mismatch.
    mode._last_device = torch.device("meta")
    fakes = []
    for a in flat_args:
        if not isinstance(a, torch.Tensor):
            continue
        i = len(fakes)
        dims = dynamic_dims.get(i)
        if isinstance(a, ShadowTensor) or a.device.type == "meta":
            raise AotNotSupported("dynamic shapes are traced from real input tensors")
        # The fakes live on the meta device, like the static path's metadata and like every
        # constant and factory result met while tracing; ShadowTensors carry the real device.
        meta = meta_like(a.detach())
        if dims:
            fake = mode.from_real(meta, dynamic_dims=dims, source=f"primals_{i}")
        else:
            fake = mode.fake_empty(meta.shape, meta.stride(), meta.dtype, meta.device)
        fakes.append(fake)
    return mode, fakes


def trace_program(
    fn,
    flat_args: list,
    in_spec,
    *,
    joint: bool,
    decompositions=None,
    dynamic_dims=None,
    size_args=None,
):
    """Trace ``fn(*tree_unflatten(flat_args, in_spec))`` into a TracedProgram.

    Tensor entries of ``flat_args`` become ``primals_i`` in order; only their metadata is used,
    so they may be real, meta or fake tensors. Other entries are baked into the graph.
    ``dynamic_dims`` (tensor index -> dims; real tensors only): trace with those sizes symbolic.
    ``size_args`` (flat position -> (tensor index, dim) or None): non-tensor inputs that are
    traced as that (symbolic) size of that tensor input, or (None) ints traced as symbols of
    their own, graph inputs ``primals_int_j`` after the tensors.
    """
    start = time.perf_counter()
    fake_mode = fakes = None
    if dynamic_dims is not None:
        fake_mode, fakes = symbolic_inputs(flat_args, dynamic_dims)
    tracer = Tracer(decompositions, fake_mode=fake_mode)
    shadows = []
    call_flat = []
    for a in flat_args:
        if isinstance(a, torch.Tensor):
            example = a if fakes is None else fakes[len(shadows)]
            s = tracer.placeholder(
                f"primals_{len(shadows)}",
                example,
                joint and a.requires_grad,
                device=a.fake_device if isinstance(a, ShadowTensor) else a.device,
            )
            shadows.append(s)
            call_flat.append(s)
        else:
            call_flat.append(a)
    int_inputs = []
    for k, where in (size_args or {}).items():
        if where is not None:
            ti, d = where
            call_flat[k] = fakes[ti].shape[d]
            continue
        name = f"primals_int_{len(int_inputs)}"
        # 0 and 1 come back as ints (specialised, with an input check on the value)
        value = fake_mode.shape_env.create_symbolic_size(flat_args[k], name, duck=False)
        node = tracer.graph.placeholder(name)
        node.meta["val"] = value
        tracer.sym_values.register_input(node, value)  # a no-op for an int
        int_inputs.append(k)
        call_flat[k] = value
    args, kwargs = tree_unflatten(call_flat, in_spec)
    grad_ctx = torch.enable_grad() if joint else torch.no_grad()
    # matmul/linear composites read concrete sizes on some builds: with symbolic sizes they
    # are computed from mm/bmm and views instead (danlu_primtorch.symbolic.composites)
    composites = SymbolicCompositeMode() if fake_mode is not None else contextlib.nullcontext()
    with grad_ctx, composites, tracer.mode:
        out = fn(*args, **kwargs)
        flat_out, out_spec = tree_flatten(out)

        roots: list[ShadowTensor] = []
        root_pos: dict[int, int] = {}
        slots: list[OutputSlot | None] = []
        groups: dict[int, list[tuple[int, ShadowTensor]]] = {}
        for k, o in enumerate(flat_out):
            slots.append(None)
            if not isinstance(o, ShadowTensor) or o.tracer is not tracer:
                if isinstance(o, ShadowTensor):
                    raise AotNotSupported("the program returned a fake tensor from another trace")
                if isinstance(o, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    raise AotNotSupported(
                        f"the program returns a symbolic size ({o}); with dynamic shapes only "
                        "tensors (and constants) may be returned"
                    )
                slots[k] = OutputSlot("const", value=o)
            elif o.root.is_constant:
                slots[k] = OutputSlot("const", chain=o.chain, value=o.root.constant_value)
            elif o.root.input_index is not None:
                slots[k] = OutputSlot(
                    "input", o.root.input_index, o.chain, detach=not o.requires_grad
                )
            else:
                groups.setdefault(id(o.root), []).append((k, o))

        def add_root(t: ShadowTensor) -> int:
            if id(t) not in root_pos:
                root_pos[id(t)] = len(roots)
                roots.append(t)
            return root_pos[id(t)]

        for members in groups.values():
            root = members[0][1].root
            # Outputs sharing memory with each other (or with their returned base) are rebuilt
            # as views of one graph output. A lone view of an internal tensor needs no aliasing,
            # nor can we use it when autograd's history sits on the view but not on the base.
            shared = len({id(o) for _, o in members}) > 1 or any(o is root for _, o in members)
            consistent = all(root.requires_grad or not o.requires_grad for _, o in members)
            for k, o in members:
                if shared and consistent:
                    slots[k] = OutputSlot(
                        "root", add_root(root), o.chain, detach=not o.requires_grad
                    )
                else:
                    slots[k] = OutputSlot("root", add_root(o), ())

        written = [s.input_index for s in shadows if s.stamp != 0]
        for i in written:
            s = shadows[i]
            if s.grad_fn is not None:
                raise AotNotSupported(
                    f"the program writes in place to input {i}, which carries autograd history"
                )
        fw_nodes = [tracer.node_of(r) for r in roots] + [shadows[i].node for i in written]
        root_diff = [joint and _differentiable(r) for r in roots]

        grad_nodes = []
        if joint:
            graph = tracer.graph
            # a program that only returns inputs or their views has no op to insert before
            first_op = next((n for n in graph.nodes if n.op != "placeholder"), None)
            diff_roots = [r for r, d in zip(roots, root_diff) if d]
            tangents = []
            where = graph.inserting_before(first_op) if first_op else graph.inserting_after()
            with where:
                for j, r in enumerate(diff_roots):
                    if fake_mode is None:
                        example = torch.empty(r.shape, dtype=r.dtype, device="meta")
                    else:
                        example = fake_mode.fake_empty(
                            r.shape, _contiguous_strides(r.shape), r.dtype, "meta"
                        )
                    tangents.append(
                        tracer.placeholder(
                            f"tangents_{j}", example, False, device=r.fake_device, is_input=False
                        )
                    )
            diff_inputs = [s for s in shadows if s.requires_grad]
            if diff_roots and diff_inputs:
                grads = torch.autograd.grad(
                    diff_roots, diff_inputs, tangents, allow_unused=True, materialize_grads=False
                )
            else:
                grads = [None] * len(diff_inputs)
            grad_nodes = [None if g is None else tracer.node_of(g) for g in grads]

    tracer.graph.output(tuple(fw_nodes + grad_nodes))
    eliminate_dead_code(tracer.graph)
    gm = tracer.graph_module()
    return TracedProgram(
        graph_module=gm,
        joint=joint,
        num_inputs=len(shadows),
        input_requires_grad=[joint and s.requires_grad for s in shadows],
        num_roots=len(roots),
        written_inputs=written,
        root_differentiable=root_diff,
        slots=slots,
        out_spec=out_spec,
        trace_seconds=time.perf_counter() - start,
        shape_env=fake_mode.shape_env if fake_mode is not None else None,
        dynamic_inputs={i: tuple(d) for i, d in (dynamic_dims or {}).items() if d},
        int_inputs=int_inputs,
    )


def eliminate_dead_code(graph: fx.Graph) -> None:
    """Drop nodes nothing uses; random ops stay (they advance the RNG exactly as eager does)."""
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.users:
            continue
        if node.op == "call_function" and is_random(node.target):
            continue
        graph.erase_node(node)
