"""Splitting a joint graph into a forward and a backward graph around a set of saved values.

With dynamic shapes the joint graph also holds *size nodes* (``meta["val"]`` a ``torch.SymInt``:
``aten.sym_size.int``, ``operator.mul`` of sizes, ...). The backward gets each size it needs
either by recomputing it from tensors it has anyway (``sym_size`` of a saved tensor or a
tangent) or, when that is not possible, as a saved SymInt (a forward output, a backward input,
a plain ``int`` at run time); sizes never make the forward save a tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor
from danlu_aotautograd.tracing.tracer import is_random

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def hint_int(x) -> int:
    """An int for a size that may be symbolic: its value for the example inputs (no guard)."""
    if isinstance(x, torch.SymInt):
        hint = getattr(x.node, "hint", None)
        if hint is None:
            raise RuntimeError(f"symbolic size {x} has no example value")
        return int(hint)
    return int(x)


def node_bytes(node: fx.Node) -> int:
    """Bytes of the tensor a node produces (0 for non-tensors; symbolic sizes count at their
    example values)."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return hint_int(val.numel()) * val.element_size()
    return 0


def is_size_node(node: fx.Node) -> bool:
    """A node computing a symbolic size (SymInt/SymFloat/SymBool), not a tensor."""
    return isinstance(node.meta.get("val"), _SYM_TYPES)


@dataclass
class JointParts:
    """The named pieces of a joint graph the partitioners work with."""

    primals: list[fx.Node]
    tangents: list[fx.Node]
    fw_outputs: list[fx.Node]
    grads: list[fx.Node | None]
    tangent_dependent: set[fx.Node]
    fw_required: set[fx.Node]  # what the forward outputs need, plus random ops and their inputs

    @classmethod
    def of(cls, joint: fx.GraphModule, num_fw_outputs: int) -> JointParts:
        nodes = list(joint.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        primals = [n for n in placeholders if n.name.startswith("primals")]
        tangents = [n for n in placeholders if n.name.startswith("tangents")]
        out = next(n for n in reversed(nodes) if n.op == "output").args[0]
        fw_outputs, grads = list(out[:num_fw_outputs]), list(out[num_fw_outputs:])
        dependent = set(tangents)
        for n in nodes:
            if n.op != "output" and any(a in dependent for a in n.all_input_nodes):
                dependent.add(n)
        if any(r in dependent for r in fw_outputs):
            raise RuntimeError("a forward output depends on a tangent")
        # random ops of the forward are never recomputed in the backward (a second draw would
        # differ); seeded ops that read a tangent are backward ops (cuDNN and efficient
        # attention's backward take the forward's seed and offset) and run there once
        roots = list(fw_outputs) + [
            n
            for n in nodes
            if n.op == "call_function" and is_random(n.target) and n not in dependent
        ]
        return cls(primals, tangents, fw_outputs, grads, dependent, ancestors(roots))


def ancestors(roots, stop=()) -> set[fx.Node]:
    """``roots`` and everything they read, not looking past ``stop``."""
    seen: set[fx.Node] = set()
    stack = [r for r in roots if isinstance(r, fx.Node)]
    stop = set(stop)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop:
            continue
        stack.extend(n.all_input_nodes)
    return seen


def extract_graph(
    joint: fx.GraphModule, inputs: list[fx.Node], outputs: list, keep=()
) -> fx.GraphModule:
    """A new graph computing ``outputs`` from ``inputs``, copying what it needs from ``joint``."""
    needed = ancestors(list(outputs) + list(keep), stop=inputs)
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for n in inputs:
        env[n] = graph.placeholder(n.name)
        env[n].meta = dict(n.meta)
    for n in joint.graph.nodes:
        if n in env or n not in needed:
            continue
        if n.op == "placeholder":
            raise RuntimeError(f"partition needs {n.name} but it is not an input of this graph")
        env[n] = graph.node_copy(n, lambda x: env[x])
    graph.output(tuple(env[o] if isinstance(o, fx.Node) else o for o in outputs))
    return fx.GraphModule(joint, graph)


@dataclass
class Partition:
    """A forward graph, a backward graph and what flows between them.

    forward: primals -> forward outputs + saved values. backward: saved values + tangents ->
    one gradient per input that requires grad (``None`` for no gradient).
    """

    forward: fx.GraphModule
    backward: fx.GraphModule
    saved: list[str]
    saved_bytes: int
    saved_input_bytes: int  # of which: inputs (already alive outside, so no extra memory)
    method: str
    details: dict = field(default_factory=dict)
    # one line per saved value, written when the partition is made: the forward graph is
    # handed to a backend afterwards, whose passes may rewrite or rename its nodes
    saved_lines: list[str] = field(default_factory=list)

    @property
    def memory_saved_bytes(self) -> int | None:
        """Bytes (not counting inputs) this partition keeps for backward fewer than the
        default partition would; None when the partitioner does not measure it."""
        baseline = self.details.get("default_saved_bytes")
        if baseline is None:
            return None
        return baseline - (self.saved_bytes - self.saved_input_bytes)

    def report(self) -> str:
        lines = [
            f"partition ({self.method}): {len(self.saved)} values saved for backward, "
            f"{self.saved_bytes} bytes ({self.saved_bytes - self.saved_input_bytes} bytes "
            f"not counting inputs)"
        ]
        baseline = self.details.get("default_saved_bytes")
        if baseline is not None:
            lines.append(
                f"  the default partition would save {baseline} bytes not counting inputs: "
                f"{self.memory_saved_bytes} bytes fewer kept for backward"
            )
        lines += [f"  {line}" for line in self.saved_lines]
        return "\n".join(lines)


def _saved_line(node: fx.Node) -> str:
    val = node.meta.get("val")
    if isinstance(val, _SYM_TYPES):
        return f"{node.name}: {type(val).__name__} {val}"
    shape = tuple(val.shape) if isinstance(val, ShadowTensor) else "?"
    return f"{node.name}: {shape} {getattr(val, 'dtype', '')} {node_bytes(node)} B"


def build_partition(
    joint: fx.GraphModule, parts: JointParts, saved: list[fx.Node], method: str, **details
) -> Partition:
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    saved = _sizes_from_saved_tensors(set(saved), parts)
    saved = sorted(saved, key=order.__getitem__)
    randoms = [  # the forward's random ops run there even when nothing reads them
        n
        for n in joint.graph.nodes
        if n.op == "call_function" and is_random(n.target) and n not in parts.tangent_dependent
    ]
    backward = extract_graph(joint, saved + parts.tangents, parts.grads)
    sink_recomputes(backward.graph)
    rebuilt = _read_sizes_from_tensor_inputs(backward)
    saved = [n for n in saved if n.name not in rebuilt]
    forward = extract_graph(joint, parts.primals, parts.fw_outputs + saved, keep=randoms)
    primal_set = set(parts.primals)
    return Partition(
        forward=forward,
        backward=backward,
        saved=[n.name for n in saved],
        saved_bytes=sum(node_bytes(n) for n in saved),
        saved_input_bytes=sum(node_bytes(n) for n in saved if n in primal_set),
        method=method,
        details=details,
        saved_lines=[_saved_line(n) for n in saved],
    )


def sink_recomputes(graph: fx.Graph) -> int:
    """Move the backward's recomputed forward ops (pure nodes that no tangent reaches) to
    just before their first user; returns how many moved.

    They are copied in the joint graph's order, so all of them come before the first
    gradient op. A backend that stores one there keeps it alive through the whole backward:
    ResNet-50's recomputed batch norm + ReLU outputs of every stage (about 330 MB) were
    written by the backward's first kernels and read by the last ones. Placed at their
    first use, each lives only as long as that layer's gradient needs it. Random and
    in-place ops keep their place."""
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    reached: set[fx.Node] = set()
    for n in nodes:
        if n.op == "placeholder":
            if n.name.startswith("tangents"):
                reached.add(n)
        elif any(a in reached for a in n.all_input_nodes):
            reached.add(n)
    # anchor: the node that stays in place before which a node is emitted (itself, or for a
    # movable node the earliest anchor of its users: users come later, so decided first)
    anchor: dict[fx.Node, int] = {}
    movable: set[fx.Node] = set()
    for n in reversed(nodes):
        if n.op == "call_function" and n not in reached and n.users and _pure(n):
            movable.add(n)
            anchor[n] = min(anchor[u] for u in n.users)
        else:
            anchor[n] = index[n]
    # same anchor: the moved nodes first, in their own (topological) order
    order = sorted(nodes, key=lambda n: (anchor[n], n not in movable, index[n]))
    moved = sum(1 for a, b in zip(order, nodes) if a is not b)
    if moved:
        out = next(n for n in reversed(nodes) if n.op == "output")
        for n in order:
            if n.op not in ("placeholder", "output"):
                out.prepend(n)
    return moved


def _pure(n: fx.Node) -> bool:
    target = n.target
    if is_random(target):
        return False
    schema = getattr(target, "_schema", None)
    if schema is None:
        return target.__module__ in ("_operator", "operator")  # getitem, size arithmetic
    return not schema.is_mutable


def _sizes_from_saved_tensors(saved: set[fx.Node], parts: JointParts) -> set[fx.Node]:
    """Saved size nodes the backward can compute from the tensors it receives (saved values
    and tangents) are dropped from ``saved``: the backward recomputes them (``sym_size`` of a
    saved tensor and arithmetic on such sizes). Other size nodes stay saved as SymInts."""
    available = {n for n in saved if not is_size_node(n)} | set(parts.tangents)
    computable: dict[fx.Node, bool] = {}

    def can(n: fx.Node) -> bool:
        if n in available:
            return True
        if n in computable:
            return computable[n]
        ok = is_size_node(n) and n.op == "call_function"
        if ok:
            computable[n] = False  # (no cycles in a DAG; guards recursion on bad input)
            ok = all(can(a) for a in n.all_input_nodes)
        computable[n] = ok
        return ok

    return {n for n in saved if not (is_size_node(n) and can(n))}


def _read_sizes_from_tensor_inputs(backward: fx.GraphModule) -> set[str]:
    """SymInt inputs of the backward whose value is a size (or an expression of sizes) of
    its tensor inputs are computed from those tensors instead (``aten.sym_size.int`` and
    arithmetic): one value less for the forward to hand over. Returns their names."""
    graph = backward.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    size_inputs = [n for n in placeholders if isinstance(n.meta.get("val"), torch.SymInt)]
    if not size_inputs:
        return set()
    from danlu_primtorch.symbolic import SymNode
    from danlu_primtorch.tracing.symbolic_values import SymbolicValues

    values = SymbolicValues(graph)
    for n in placeholders:
        if isinstance(n.meta.get("val"), torch.Tensor):
            values.register_input(n, n.meta["val"])
    first_op = next((n for n in graph.nodes if n.op != "placeholder"), None)
    rebuilt = set()
    for p in size_inputs:
        sym = p.meta["val"]
        if not isinstance(sym.node, SymNode):
            continue
        if not sym.node.expr.free_symbols <= set(values.origins):
            continue
        with graph.inserting_before(first_op):
            node = values.node_for(sym)
        if isinstance(node, fx.Node):
            node.meta.setdefault("val", sym)
        p.replace_all_uses_with(node)
        graph.erase_node(p)
        rebuilt.add(p.name)
    if rebuilt:
        graph.lint()
        backward.recompile()
    return rebuilt
