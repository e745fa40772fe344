"""Running an FX graph with the boxed calling convention.

A boxed callable takes its inputs as one list and empties it, so it holds the only references
to them; it then drops every value right after its last use. For a backward graph this is
what lets saved activations be freed one by one as the backward consumes them, instead of all
living until the backward ends (the plain ``gm(*args)`` call keeps every argument alive in
the caller). Callables marked ``_boxed_call = True`` are called this way by our runtime.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from torch.utils._pytree import tree_map


class BoxedGraph:
    _boxed_call = True

    def __init__(self, gm: fx.GraphModule):
        self.gm = gm
        nodes = list(gm.graph.nodes)
        last_use: dict[fx.Node, int] = {}
        for i, n in enumerate(nodes):
            for a in n.all_input_nodes:
                last_use[a] = i
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.steps = []
        for i, n in enumerate(nodes):
            if n.op == "placeholder":
                continue
            dead = [a for a in n.all_input_nodes if last_use[a] == i]
            self.steps.append((n, dead))

    def __call__(self, args: list):
        env = dict(zip(self.placeholders, args))
        args.clear()
        for node, dead in self.steps:
            if node.op == "output":
                return tree_map(lambda a: env[a] if isinstance(a, fx.Node) else a, node.args[0])
            if node.op == "get_attr":
                env[node] = getattr(self.gm, node.target)
            else:
                fargs, fkwargs = tree_map(
                    lambda a: env[a] if isinstance(a, fx.Node) else a, (node.args, node.kwargs)
                )
                env[node] = node.target(*fargs, **fkwargs)
            for d in dead:
                del env[d]
        raise RuntimeError("graph has no output node")


def call_compiled(fn, args: list):
    """Call a compiled graph: boxed callables get the list (and empty it), others ``*args``.

    The traced graphs already hold the casts autocast made while tracing, so they run with
    autocast off: left on, it would cast the recorded ops' inputs a second time and the graph's
    values would no longer have the dtypes its compiler planned for."""
    if torch._C._is_any_autocast_enabled():
        with torch._C._DisableAutocast():
            return _call(fn, args)
    return _call(fn, args)


def _call(fn, args: list):
    if getattr(fn, "_boxed_call", False):
        return fn(args)
    return fn(*args)
