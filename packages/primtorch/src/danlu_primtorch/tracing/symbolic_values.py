"""Size computations as graph nodes.

When an op takes a symbolic size (``view(x, [s0 * 4, 16])``, ``full([s0], ...)``), the graph
must compute that size from its inputs, so the graph can run at other sizes. Each symbol is
read from the first graph input that carries it (``aten.sym_size.int(arg0, 0)``,
``aten.sym_stride.int``, or a SymInt placeholder); expressions over symbols become
``operator`` calls (``operator.mul(sym_size, 4)``), built once per expression and reused.
Every such node has ``meta["val"]``: the SymInt/SymFloat/SymBool it computes.
"""

from __future__ import annotations

import math
import operator

import sympy
import torch
import torch.fx as fx

from ..symbolic import FloorDiv, SymNode

aten = torch.ops.aten

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)

# Callables size nodes use; all free of effects (dead-code elimination may drop them).
PURE_SIZE_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.neg,
    operator.floordiv,
    operator.truediv,
    operator.mod,
    operator.pow,
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    math.floor,
    math.ceil,
    torch.sym_max,
    torch.sym_min,
    torch.sym_not,
    torch.sym_float,
}

_RELATIONS = {
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.StrictLessThan: operator.lt,
    sympy.LessThan: operator.le,
    sympy.StrictGreaterThan: operator.gt,
    sympy.GreaterThan: operator.ge,
}


class SymbolicValues:
    """Per-tracer map from size symbols / expressions to the graph nodes computing them."""

    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.origins: dict[sympy.Symbol, tuple] = {}  # symbol -> (kind, node, dim)
        self.nodes: dict = {}  # simplified expression -> node

    def register_input(self, node: fx.Node, value) -> None:
        """Note which symbols the graph input ``node`` (holding ``value``) carries."""
        if isinstance(value, SYM_TYPES) and isinstance(value.node, SymNode):
            expr = value.node.expr
            if expr.is_Symbol and expr not in self.origins:
                self.origins[expr] = ("value", node, None)
                self.nodes[expr] = node
            return
        if not isinstance(value, torch.Tensor):
            return
        for kind, items in (("size", value.shape), ("stride", value.stride())):
            for d, s in enumerate(items):
                if isinstance(s, torch.SymInt) and isinstance(s.node, SymNode):
                    expr = s.node.expr
                    if expr.is_Symbol and expr not in self.origins:
                        self.origins[expr] = (kind, node, d)

    def node_for(self, value):
        """A graph argument computing ``value`` (a SymInt/SymFloat/SymBool): a node, or a
        Python number when the value is a known constant."""
        node = value.node
        if not isinstance(node, SymNode):
            raise TypeError(f"{value!r} is not a danlu symbolic value")
        return self._materialize(node.expr, node.env)

    def _materialize(self, expr, env):
        expr = env.simplify(expr)
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        if expr.is_Integer:
            return int(expr)
        if expr.is_Number:
            return float(expr)
        hit = self.nodes.get(expr)
        if hit is not None:
            return hit
        node = self._build(expr, env)
        if isinstance(node, fx.Node):
            node.meta["val"] = _sym_value(expr, env)
            self.nodes[expr] = node
        return node

    def _call(self, fn, *args):
        node = self.graph.call_function(fn, args)
        # The value it computes: the same operation on the symbolic values (no guards).
        node.meta["val"] = fn(*[a.meta["val"] if isinstance(a, fx.Node) else a for a in args])
        return node

    def _build(self, expr, env):
        m = lambda e: self._materialize(e, env)  # noqa: E731
        if expr.is_Symbol:
            return self._symbol(expr)
        if isinstance(expr, sympy.Add):
            terms = sorted(expr.args, key=lambda t: t.could_extract_minus_sign())
            acc = None
            for t in terms:
                neg = t.could_extract_minus_sign()
                v = m(-t if neg else t)
                if acc is None:
                    acc = self._call(operator.neg, v) if neg else v
                else:
                    acc = self._call(operator.sub if neg else operator.add, acc, v)
            return acc
        if isinstance(expr, sympy.Mul):
            coeff, rest = expr.as_coeff_Mul()
            factors = sympy.Mul.make_args(rest)
            acc = m(factors[0])
            for f in factors[1:]:
                acc = self._call(operator.mul, acc, m(f))
            if coeff == 1:
                return acc
            if coeff == -1:
                return self._call(operator.neg, acc)
            if coeff.is_Integer:
                return self._call(operator.mul, acc, int(coeff))
            if not coeff.is_Rational:  # a float factor (``n * 0.5``): int() would truncate it
                return self._call(operator.mul, acc, float(coeff))
            p, q = sympy.fraction(coeff)
            if p != 1:
                acc = self._call(operator.mul, acc, int(p))
            return self._call(operator.truediv, acc, int(q))
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
            e = int(expr.exp)
            base = m(expr.base)
            if e > 0:
                return self._call(operator.pow, base, e)
            return self._call(operator.truediv, 1, self._call(operator.pow, base, -e))
        if isinstance(expr, FloorDiv):
            return self._call(operator.floordiv, m(expr.args[0]), m(expr.args[1]))
        if isinstance(expr, sympy.Mod):
            return self._call(operator.mod, m(expr.args[0]), m(expr.args[1]))
        if isinstance(expr, (sympy.Max, sympy.Min)):
            fn = torch.sym_max if isinstance(expr, sympy.Max) else torch.sym_min
            args = [m(a) for a in expr.args]
            acc = args[0]
            for a in args[1:]:
                acc = self._call(fn, acc, a)
            return acc
        if isinstance(expr, sympy.floor):
            return self._call(math.floor, m(expr.args[0]))
        if isinstance(expr, sympy.ceiling):
            return self._call(math.ceil, m(expr.args[0]))
        if type(expr) in _RELATIONS:
            return self._call(_RELATIONS[type(expr)], m(expr.lhs), m(expr.rhs))
        if isinstance(expr, sympy.Not):
            return self._call(torch.sym_not, m(expr.args[0]))
        from .tracer import TracingError

        raise TracingError(f"cannot express the symbolic size {expr} as graph nodes")

    def _symbol(self, sym):
        origin = self.origins.get(sym)
        if origin is None:
            from .tracer import TracingError

            raise TracingError(
                f"size symbol {sym} is not carried by any graph input (sizes must come from "
                "the traced function's inputs)"
            )
        kind, node, d = origin
        if kind == "value":
            return node
        op = aten.sym_size.int if kind == "size" else aten.sym_stride.int
        out = self.graph.call_function(op, (node, d))
        return out


def _sym_value(expr, env):
    if expr.is_Boolean or expr.is_Relational:
        pytype = bool
    elif expr.is_integer:
        pytype = int
    else:
        pytype = float
    return SymNode(expr, env, pytype, env.hint_of(expr)).wrap()
