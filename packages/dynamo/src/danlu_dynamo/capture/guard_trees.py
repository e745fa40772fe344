"""Module trees in a guard check: most of a model's guards tested by one C call.

A model's check is mostly the same few guards per module: its identity under its parent's
``_modules``, its constant attributes (stride, padding, eps, the training flag), "no hooks",
and its parameters' and buffers' metadata. Written one per line they cost ResNet-50's check
about 100 us a call, most of it the Python lines themselves. Here they become a tree of
nodes, one per module (or other plain object) whose guards it settles, which
``_guard_checks.module_tree`` walks in C: per node the object's type, each captured immutable
attribute still being the very object in its ``__dict__``, the hook test, each parameter or
buffer through the tensor test, then each child (the same object under the same
``_modules`` key) the same way.

The tree answers only "all hold". Where it says no, the check returns what the guards one by
one answer (``GuardSet.compile_for_frame`` builds both), so an equal value that is another
object (a stride tuple rebuilt) still passes, and a failure still names its guard.
"""

from __future__ import annotations

import ast
import dataclasses
import types

import torch

from .source import fast_suffix, lookup

# the NO_HOOKS tests a node can run: ``hooks`` 1 and 2 in ``module_tree``
HOOK_TESTS = {"___hookless_module": 1, "___plain_module": 2}
STORES = ("_parameters", "_buffers")


@dataclasses.dataclass(eq=False)
class Node:
    cls: type
    keys: list = dataclasses.field(default_factory=list)
    values: list = dataclasses.field(default_factory=list)
    hooks: int = 0
    # "_parameters" -> ([names], [tensor test specs, None for "is None"])
    stores: dict = dataclasses.field(default_factory=dict)
    # (key under ``_modules``, the child object, its Node)
    children: list = dataclasses.field(default_factory=list)
    # names the object has no attribute of (``not hasattr``), where its ``__getattr__`` is
    # nn.Module's: the C test looks where that one looks
    absent: list = dataclasses.field(default_factory=list)
    guards: list = dataclasses.field(default_factory=list)  # the guards this node settles
    has_parent: bool = False

    def spec(self) -> tuple:
        """The node as ``module_tree`` reads it: (cls, keys, values, hooks, stores,
        children, absent, getattr_fn)."""
        stores = tuple((k, tuple(n), tuple(s)) for k, (n, s) in self.stores.items())
        children = tuple((k, obj, node.spec()) for k, obj, node in self.children)
        head = (self.cls, tuple(self.keys), tuple(self.values), self.hooks, stores, children)
        return head + (tuple(self.absent), torch.nn.Module.__getattr__)

    def all_guards(self) -> list:
        out = list(self.guards)
        for _, _, child in self.children:
            out += child.all_guards()
        return out


def plain_dict(owner) -> bool:
    """Is ``owner.__dict__`` the instance dict itself (the type's standard ``__dict__``, no
    ``__getattribute__`` of the type's own)?"""
    cls = type(owner)
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    for k in cls.__mro__:
        if "__dict__" in k.__dict__:
            return type(k.__dict__["__dict__"]) is types.GetSetDescriptorType
    return False


def _module_getattr(cls) -> bool:
    """Is ``cls.__getattr__`` nn.Module's (which finds only ``_parameters``, ``_buffers`` and
    ``_modules`` entries)?"""
    for k in cls.__mro__:
        if "__getattr__" in k.__dict__:
            return k.__dict__["__getattr__"] is torch.nn.Module.__getattr__
    return False


def plain_instance_attr(owner, name: str) -> bool:
    """Is ``owner.name`` the value in ``owner.__dict__`` (no data descriptor of that name on
    the type)?"""
    d = owner.__dict__
    if type(d) is not dict or name not in d:
        return False
    for k in type(owner).__mro__:
        if name in k.__dict__:
            kind = type(k.__dict__[name])
            return not (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))
    return True


def module_trees(guards, values, tensor_test: str) -> tuple[dict, dict]:
    """``(roots, settled)``: root expression -> ``Node``, and ``id(guard)`` -> its root's
    expression for each guard a tree settles. ``values``: the frame's ``FrameValues``;
    ``tensor_test``: the tensor guard the tree's C call runs (``___tensor_read`` or
    ``___tensor_ok``), so a tensor guard written with the other stays a line of its own."""
    nodes: dict = {}

    def node_for(expr: str):
        if expr not in nodes:
            obj = values(expr)
            nodes[expr] = Node(type(obj)) if obj is not None and plain_dict(obj) else None
        return nodes[expr]

    def attribute(g):
        """(parent expression, parent value, name) of an ``owner.name`` source, or None."""
        src = lookup(g.source)
        if src is None or src.parent is None or src.prefix or not src.suffix.startswith("."):
            return None
        owner = values(src.parent.expr)
        return None if owner is None else (src.parent.expr, owner, src.suffix[1:])

    edges = []
    for g in guards:
        if g.kind == "HASATTR" and g.expr.startswith("not hasattr("):
            node = node_for(g.source)
            name = g.expr[len(f"not hasattr({g.source}, ") : -1]
            if node is not None and g.expr == f"not hasattr({g.source}, {name})":
                name = ast.literal_eval(name)
                if _module_getattr(node.cls) and not hasattr(values(g.source), name):
                    node.absent.append(name)
                    node.guards.append(g)
            continue
        if g.kind == "NO_HOOKS" and g.source:
            test = g.expr.split("(", 1)[0]
            node = node_for(g.source)
            if node is not None and g.expr == f"{test}({g.source}.__dict__)" and test in HOOK_TESTS:
                node.hooks = HOOK_TESTS[test]
                node.guards.append(g)
            continue
        if g.value is None or g.kind not in ("CONSTANT_MATCH", "TENSOR_MATCH", "ID_MATCH"):
            continue
        if g.kind == "TENSOR_MATCH" and not g.expr.startswith(tensor_test + "("):
            continue
        if g.kind == "ID_MATCH":
            src = lookup(g.source)
            if src is not None and src.parent is not None and not src.prefix:
                owner = values(src.parent.expr)
                read = fast_suffix(owner, src.suffix) if owner is not None else ""
                if read.startswith("._modules[") and values(g.source) is g.value[0]:
                    edges.append((src.parent.expr, read[len("._modules[") : -1], g))
            continue
        found = attribute(g)
        if found is None:
            continue
        parent, owner, name = found
        node = node_for(parent)
        if node is None:
            continue
        if g.kind == "CONSTANT_MATCH" and plain_instance_attr(owner, name):
            if owner.__dict__[name] is g.value[0]:
                node.keys.append(name)
                node.values.append(g.value[0])
                node.guards.append(g)
            continue
        if g.kind == "CONSTANT_MATCH" and g.value[0] is not None:
            continue
        read = fast_suffix(owner, "." + name)
        store = next((k for k in STORES if read == f".{k}[{name!r}]"), None)
        if store is not None:
            names, specs = node.stores.setdefault(store, ([], []))
            names.append(name)
            specs.append(g.value[0])
            node.guards.append(g)
    for parent, key, g in edges:
        node, child = node_for(parent), node_for(g.source)
        if node is None or child is None or child.has_parent:
            continue
        child.has_parent = True
        node.children.append((ast.literal_eval(key), g.value[0], child))
        node.guards.append(g)
    roots, settled = {}, {}
    for e, n in nodes.items():
        settles = n.all_guards() if n is not None and not n.has_parent else []
        if settles:
            roots[e] = n
            settled.update((id(g), e) for g in settles)
    return roots, settled
