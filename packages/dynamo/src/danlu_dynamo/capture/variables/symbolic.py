"""Symbolic sizes in the trace: ints computed from dynamic tensor sizes.

With dynamic shapes an input's fake tensor has ``torch.SymInt`` sizes (danlu_primtorch's
ShapeEnv). ``x.shape[0]`` then is a ``SymNumVar``: a graph node (``x.size(0)``, then
``operator`` arithmetic) together with its SymInt, so the graph computes the size for each
call instead of baking in the traced one. A Python decision on it (``if n > 16``, ``int(n)``,
``range(n)``) is answered from the SymInt's example value and recorded by the ShapeEnv as a
guard; that includes every path that asks for a constant (``const()``): those specialise the
size (guarded by ``Eq``), which is always correct, only less general.
"""

from __future__ import annotations

import operator

import torch

from ..exc import Unsupported
from .base import ConstVar, Var

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def is_symbolic(v) -> bool:
    """Whether ``v`` (a Python value) holds a SymInt/SymFloat/SymBool anywhere."""
    t = type(v)
    if t in SYM_TYPES:
        return not _const_node(v)
    if t in (tuple, list, torch.Size):
        return any(is_symbolic(x) for x in v)
    if t is slice:
        return is_symbolic(v.start) or is_symbolic(v.stop) or is_symbolic(v.step)
    return False


def _const_node(v) -> bool:
    node = v.node
    return bool(getattr(node, "is_constant", lambda: False)())


def concrete(v):
    """``v`` with every symbolic number replaced by its value; each replacement records a
    guard in the ShapeEnv (``int(s)`` specialises ``s``)."""
    t = type(v)
    if t is torch.SymInt:
        return int(v)
    if t is torch.SymFloat:
        return float(v)
    if t is torch.SymBool:
        return bool(v)
    if t in (tuple, list):
        return t(concrete(x) for x in v)
    if t is torch.Size:
        return torch.Size([concrete(x) for x in v])
    if t is slice:
        return slice(concrete(v.start), concrete(v.stop), concrete(v.step))
    return v


class SymNumVar(Var):
    """A symbolic int/float: ``node`` computes it in the graph, ``example`` is its SymInt."""

    def __init__(self, node, example):
        self.node = node
        self.example = example
        node.meta["val"] = example
        node.meta["example_value"] = example

    def python_type(self):
        return int if isinstance(self.example, torch.SymInt) else float

    # Code that needs a constant specialises the size (a guard); see the module docstring.
    def is_const(self):
        return True

    def const(self):
        return concrete(self.example)

    def truth(self, tx):
        return bool(self.example)

    def getattr(self, tx, name):
        return ConstVar(self.const()).getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        return ConstVar(self.const()).call_method(tx, name, args, kwargs)

    def unpack(self, tx):
        raise Unsupported("iterating over an int")

    def reconstruct(self, cg):
        # Computed from the input sizes it stands for, not returned by the graph (backends
        # such as aotautograd take graphs that return tensors only).
        from ..dynamic import value_expr
        from ..source import Source

        return cg.from_source(Source(value_expr(self.example)))

    source = None

    def __repr__(self):
        return f"SymNum({self.node.name}, {self.example})"


class SliceVar(Var):
    """A slice with symbolic bounds (``x[:, :n]``)."""

    def __init__(self, parts):
        self.parts = parts  # start, stop, step: ConstVar or SymNumVar

    def python_type(self):
        return slice

    def is_const(self):
        return True

    def const(self):
        return slice(*(p.const() for p in self.parts))

    def reconstruct(self, cg):
        fns = [cg.rebuild(p) for p in self.parts]
        return lambda ctx: slice(*(f(ctx) for f in fns))

    def __repr__(self):
        return f"Slice({self.parts})"


def node_of(v):
    """The graph argument for ``v`` (a SymNumVar's node, a SliceVar's slice of nodes)."""
    if isinstance(v, SymNumVar):
        return v.node
    if isinstance(v, SliceVar):
        return slice(*(node_of(p) if isinstance(p, SymNumVar) else p.const() for p in v.parts))
    raise TypeError(v)


def example_of(v):
    if isinstance(v, SymNumVar):
        return v.example
    if isinstance(v, SliceVar):
        return slice(*(example_of(p) if isinstance(p, SymNumVar) else p.const() for p in v.parts))
    raise TypeError(v)


def wrap_symbolic(output, node, value) -> Var:
    """A Var for ``value`` (an op's result holding SymInts) computed by ``node``: numbers
    become ``SymNumVar``s, tuples/sizes tuples of them (``getitem`` nodes per symbolic item),
    SymBools a guarded constant."""
    from .containers import TupleVar

    t = type(value)
    if t is torch.SymBool:
        return ConstVar(bool(value))
    if t in (torch.SymInt, torch.SymFloat):
        if _const_node(value):
            return ConstVar(concrete(value))
        return SymNumVar(node, value)
    if t in (tuple, list, torch.Size):
        items = []
        for i, x in enumerate(value):
            if is_symbolic(x):
                sub = output.graph.create_node("call_function", operator.getitem, (node, i), {})
                items.append(wrap_symbolic(output, sub, x))
            else:
                items.append(ConstVar(x))
        if t is list:
            return _list(items)
        return TupleVar(items, py_type=t)
    return ConstVar(concrete(value))


def _list(items):
    from .containers import ListVar

    return ListVar(items)


_PY_OPS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.neg,
    operator.pos,
    operator.abs,
}
_CMP_OPS = {operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge}
_INPLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
}


def _operand(v):
    """(graph arg, example) of an operand, or None when it is not a plain number."""
    if isinstance(v, SymNumVar):
        return v.node, v.example
    if isinstance(v, ConstVar) and type(v.value) in (int, float, bool):
        return v.value, v.value
    return None


def sym_binary(tx, op, a: Var, b: Var) -> Var | None:
    """``op(a, b)`` where one side is a SymNumVar; None when this is not number arithmetic
    (the caller then specialises)."""
    op = _INPLACE.get(op, op)
    pa, pb = _operand(a), _operand(b)
    if pa is None or pb is None or (op not in _PY_OPS and op not in _CMP_OPS):
        return None
    result = op(pa[1], pb[1])
    if op in _CMP_OPS:
        return ConstVar(bool(result))  # guarded by the ShapeEnv
    if not is_symbolic(result):
        return ConstVar(concrete(result))
    node = tx.output.graph.create_node("call_function", op, (pa[0], pb[0]), {})
    return SymNumVar(node, result)


def sym_unary(tx, op, v: SymNumVar) -> Var | None:
    if op not in (operator.neg, operator.pos, operator.abs):
        return None
    result = op(v.example)
    if not is_symbolic(result):
        return ConstVar(concrete(result))
    node = tx.output.graph.create_node("call_function", op, (v.node,), {})
    return SymNumVar(node, result)
