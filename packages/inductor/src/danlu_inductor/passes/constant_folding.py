"""Values that depend on no graph input, computed once at compile time.

Programs rebuild some tensors from sizes alone on every call: shifted-window attention's mask
is a zeros tensor filled slice by slice, cut into windows, compared and filled again (about 30
ops per block, every call). Such a node — every input a constant or another such node, no
random op among them — has the same value on every call, so it is computed here with real
tensors and becomes a graph constant: the kernels read it instead of rebuilding it.

Only worth it for a chain of work: a node is folded when the constant ops feeding it (itself
included) number at least ``MIN_OPS`` (a lone ``full`` fuses into its users for free), and
its value has at most ``MAX_ELEMENTS`` elements (a big constant costs memory and reads).
Graphs with symbolic sizes fold nothing that reads a size (those nodes depend on inputs).
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import fx
from torch.utils import _pytree as pytree

log = logging.getLogger("danlu_inductor")

MIN_OPS = 3
MAX_ELEMENTS = 1 << 20


def _foldable_op(node: fx.Node) -> bool:
    t = node.target
    if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return False
    return torch.Tag.nondeterministic_seeded not in t.tags  # random: a new value every call


def _writes(node: fx.Node) -> bool:
    t = node.target
    return isinstance(t, torch._ops.OpOverload) and any(
        a.alias_info and a.alias_info.is_write for a in t._schema.arguments
    )


def fold_constants(gm: fx.GraphModule) -> int:
    """Replace folded nodes by constants of ``gm``; returns how many nodes were replaced.
    A graph that writes in place (not functional) is left alone: a write could change a value
    after it was folded."""
    if any(_writes(n) for n in gm.graph.nodes if n.op == "call_function"):
        return 0
    constant: dict[fx.Node, int] = {}  # node -> ops in its constant cone (itself included)
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant[node] = 0
        elif _foldable_op(node) and all(a in constant for a in node.all_input_nodes):
            cone = set()
            stack = [node]
            while stack:
                n = stack.pop()
                if n in cone or n.op != "call_function":
                    continue
                cone.add(n)
                stack.extend(n.all_input_nodes)
            constant[node] = len(cone)
        elif (
            node.op == "call_function"
            and node.target.__module__ == "_operator"
            and all(a in constant for a in node.all_input_nodes)
            and node.all_input_nodes
        ):  # getitem of a constant op's results
            constant[node] = constant[node.all_input_nodes[0]]
    frontier = []
    for node, ops in constant.items():
        if node.op == "get_attr" or ops < MIN_OPS:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.numel() > MAX_ELEMENTS:
            continue
        if any(u not in constant for u in node.users):  # read by the rest of the graph
            frontier.append(node)
    if not frontier:
        return 0
    values = _evaluate(gm, [n for n in constant if n.op != "placeholder"])
    if values is None:
        return 0
    for i, node in enumerate(frontier):
        name = f"_folded_constant_{i}"
        while hasattr(gm, name):
            name += "_"
        value = values[node]
        if not isinstance(value, torch.Tensor):
            continue
        gm.register_buffer(name, value.detach(), persistent=False)
        with gm.graph.inserting_before(node):
            new = gm.graph.get_attr(name)
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    log.info("danlu_inductor: folded %d constant values", len(frontier))
    return len(frontier)


def _evaluate(gm: fx.GraphModule, nodes: list) -> dict | None:
    """Real values of the constant nodes (in graph order), or None if one cannot run."""
    env: dict = {}

    def value(a):
        return env[a] if isinstance(a, fx.Node) else a

    try:
        for node in nodes:
            if node.op == "get_attr":
                env[node] = functools.reduce(getattr, node.target.split("."), gm)
                continue
            args, kwargs = pytree.tree_map(value, (node.args, node.kwargs))
            with torch.no_grad():
                env[node] = node.target(*args, **kwargs)
    except Exception as e:  # a constant the device cannot compute now: leave the graph as is
        log.info("danlu_inductor: constant folding skipped: %s: %s", type(e).__name__, e)
        return None
    return env
