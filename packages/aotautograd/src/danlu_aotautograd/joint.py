"""Tracing a program into one graph: the joint forward+backward graph, or a forward-only one.

The joint graph's placeholders are ``primals_*`` (every tensor input, parameters and buffers
included) then ``tangents_*`` (one per differentiable forward output). Its outputs are the
forward outputs followed by one gradient per input that requires grad (``None`` where the
input gets no gradient). The forward outputs are, in order: the program's outputs that own
their memory ("roots"), then the new values of inputs the program writes to.

How each user-visible output is rebuilt from those lives in ``OutputPlan``: outputs that are
views of an input or of another output are replayed as views at runtime, so callers see the
same aliasing as in eager.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from danlu_aotautograd.errors import AotNotSupported
from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor
from danlu_aotautograd.tracing.tracer import Tracer, is_random


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

    @property
    def num_fw_outputs(self) -> int:
        return self.num_roots + len(self.written_inputs)

    @property
    def fw_differentiable(self) -> list[bool]:
        return self.root_differentiable + [False] * len(self.written_inputs)


def _differentiable(t: torch.Tensor) -> bool:
    return t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)


def trace_program(fn, flat_args: list, in_spec, *, joint: bool, decompositions=None):
    """Trace ``fn(*tree_unflatten(flat_args, in_spec))`` into a TracedProgram.

    Tensor entries of ``flat_args`` become ``primals_i`` in order; only their metadata is used,
    so they may be real, meta or fake tensors. Other entries are baked into the graph.
    """
    start = time.perf_counter()
    tracer = Tracer(decompositions)
    shadows = []
    call_flat = []
    for a in flat_args:
        if isinstance(a, torch.Tensor):
            s = tracer.placeholder(f"primals_{len(shadows)}", a, joint and a.requires_grad)
            shadows.append(s)
            call_flat.append(s)
        else:
            call_flat.append(a)
    args, kwargs = tree_unflatten(call_flat, in_spec)
    grad_ctx = torch.enable_grad() if joint else torch.no_grad()
    with grad_ctx, tracer.mode:
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
                slots[k] = OutputSlot("const", value=o)
            elif o.root.is_constant:
                slots[k] = OutputSlot("const", chain=o.chain, value=o.root.constant_value)
            elif o.root.input_index is not None:
                slots[k] = OutputSlot("input", o.root.input_index, o.chain)
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
                    slots[k] = OutputSlot("root", add_root(root), o.chain)
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
            first_op = next(n for n in graph.nodes if n.op != "placeholder")
            diff_roots = [r for r, d in zip(roots, root_diff) if d]
            tangents = []
            with graph.inserting_before(first_op):
                for j, r in enumerate(diff_roots):
                    example = torch.empty(r.shape, dtype=r.dtype, device="meta")
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
    )


def eliminate_dead_code(graph: fx.Graph) -> None:
    """Drop nodes nothing uses; random ops stay (they advance the RNG exactly as eager does)."""
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.users:
            continue
        if node.op == "call_function" and is_random(node.target):
            continue
        graph.erase_node(node)
