"""SymNode: the Python object inside a ``torch.SymInt`` / ``SymFloat`` / ``SymBool``.

torch calls these methods by name, from C++ (``PythonSymNodeImpl`` in
``torch/csrc/utils/python_symnode.h``: ``add``, ``guard_bool``, ``is_contiguous``, ...) and from
the Python magic methods of ``torch.SymInt`` (``__add__`` calls ``node.add(other_node)``,
``__bool__`` calls ``node.bool_()``, ``repr`` calls ``node._graph_repr()``). Each node holds
a sympy expression over the ShapeEnv's size symbols, its Python type (int, float, bool) and
its hint: the value the expression has for the example inputs. Arithmetic builds new nodes;
turning a node into a Python value (``bool(x.shape[0] > 16)``, ``int(s)``) asks the ShapeEnv,
which answers from the hint and records a guard unless the answer holds for every size.

The node deliberately has no ``shape_env`` attribute: torch's Python helpers
(``guard_or_false``, ``statically_known_true``) then take their path for symbolic nodes of
other systems and call the methods below.
"""

from __future__ import annotations

import builtins
import math
import operator

import sympy
import torch

from .functions import FloorDiv, is_contiguous_expr

_PYTYPE_TO_SYM = {int: torch.SymInt, float: torch.SymFloat, bool: torch.SymBool}


def _result_type(a: SymNode, b: SymNode) -> type:
    return float if float in (a.pytype, b.pytype) else int


def _floor_div_hint(a, b):
    return a // b if isinstance(a, int) and isinstance(b, int) else float(math.floor(a / b))


class SymNode:
    """A symbolic int / float / bool: ``expr`` (sympy), ``pytype``, ``hint`` (example value)."""

    def __init__(self, expr, env, pytype: type, hint, *, constant=None):
        self._expr = sympy.sympify(expr)
        self.env = env
        self.pytype = pytype
        self.hint = pytype(hint) if hint is not None else None
        self.constant = constant

    # --- what torch reads ------------------------------------------------------------------
    @property
    def expr(self):
        """The expression with the ShapeEnv's known equalities applied."""
        return self.env.simplify(self._expr)

    @property
    def _hint(self):
        return self.hint

    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def nested_int(self):
        return None

    def nested_int_coeff(self):
        return None

    def is_constant(self) -> bool:
        return self.constant is not None

    def is_symbolic(self) -> bool:
        return self.constant is None and not self.expr.is_number

    def has_hint(self) -> bool:
        return self.hint is not None

    def require_hint(self, fallback=None):
        return self.hint if self.hint is not None else fallback

    def constant_int(self):
        return self.constant if self.pytype is int else None

    def constant_bool(self):
        return self.constant if self.pytype is bool else None

    def maybe_as_int(self):
        e = self.expr
        return int(e) if self.pytype is int and e.is_Integer else None

    def maybe_as_float(self):
        e = self.expr
        return float(e) if self.pytype is float and e.is_number else None

    def maybe_as_bool(self):
        e = self.expr
        return bool(e) if e in (sympy.true, sympy.false) else None

    def str(self) -> builtins.str:
        return builtins.str(self.expr)

    def _graph_repr(self) -> builtins.str:
        return builtins.str(self.expr)

    def __repr__(self) -> builtins.str:
        return f"SymNode({self.expr}, {self.pytype.__name__}, hint={self.hint})"

    def clone(self) -> SymNode:
        return self

    def wrap_int(self, num: int) -> SymNode:
        return SymNode(sympy.Integer(num), self.env, int, num, constant=num)

    def wrap_float(self, num: float) -> SymNode:
        return SymNode(sympy.Float(num), self.env, float, num, constant=num)

    def wrap_bool(self, num: bool) -> SymNode:
        return SymNode(sympy.true if num else sympy.false, self.env, bool, num, constant=num)

    def _new(self, expr, pytype, hint) -> SymNode:
        return SymNode(expr, self.env, pytype, hint)

    # --- arithmetic --------------------------------------------------------------------------
    def add(self, other):
        return self._new(self.expr + other.expr, _result_type(self, other), self.hint + other.hint)

    def sub(self, other):
        return self._new(self.expr - other.expr, _result_type(self, other), self.hint - other.hint)

    def mul(self, other):
        return self._new(self.expr * other.expr, _result_type(self, other), self.hint * other.hint)

    def mod(self, other):
        return self._new(
            sympy.Mod(self.expr, other.expr), _result_type(self, other), self.hint % other.hint
        )

    def floordiv(self, other):
        t = _result_type(self, other)
        if t is int:
            expr = FloorDiv(self.expr, other.expr)
        else:
            expr = sympy.floor(self.expr / other.expr)
        return self._new(expr, t, _floor_div_hint(self.hint, other.hint))

    int_floordiv = floordiv

    def truediv(self, other):
        return self._new(self.expr / other.expr, float, self.hint / other.hint)

    int_truediv = truediv
    float_truediv = truediv

    def pow_by_natural(self, other):
        return self._new(self.expr**other.expr, int, self.hint**other.hint)

    def float_pow(self, other):
        return self._new(self.expr**other.expr, float, float(self.hint) ** other.hint)

    def pow(self, other):
        if self.pytype is int and other.pytype is int and other.hint >= 0:
            self.env.evaluate(sympy.Ge(other.expr, 0), True)
            return self.pow_by_natural(other)
        return self.float_pow(other)

    def neg(self):
        return self._new(-self.expr, self.pytype, -self.hint)

    def pos(self):
        return self

    def abs(self):
        return self._new(sympy.Abs(self.expr), self.pytype, abs(self.hint))

    def sym_min(self, other):
        t = _result_type(self, other)
        return self._new(sympy.Min(self.expr, other.expr), t, min(self.hint, other.hint))

    def sym_max(self, other):
        t = _result_type(self, other)
        return self._new(sympy.Max(self.expr, other.expr), t, max(self.hint, other.hint))

    def sym_float(self):
        return self._new(self.expr, float, float(self.hint))

    def floor(self):
        if self.pytype is int:
            return self
        return self._new(sympy.floor(self.expr), int, math.floor(self.hint))

    def ceil(self):
        if self.pytype is int:
            return self
        return self._new(sympy.ceiling(self.expr), int, math.ceil(self.hint))

    def trunc(self):
        if self.pytype is int:
            return self
        # trunc is floor for non-negative values and ceil for negative ones: decide the sign.
        if self.env.evaluate(sympy.Ge(self.expr, 0), self.hint >= 0):
            return self.floor()
        return self.ceil()

    sym_int = trunc

    def round(self, ndigits=None):
        value = builtins.round(self.guard_float("", 0), ndigits)
        return self.wrap_int(value) if ndigits is None else self.wrap_float(value)

    def sym_sum(self, nodes):
        # torch.sym_sum(xs) calls xs[0].node.sym_sum(all nodes): self is only the context.
        if not nodes:
            return self.wrap_int(0)
        node = nodes[0]
        for o in nodes[1:]:
            node = node.add(o)
        return node

    # --- comparisons and logic ---------------------------------------------------------------
    def _compare(self, other, rel, op):
        hint = op(self.hint, other.hint)
        a, b = self.expr, other.expr
        if a.is_number and b.is_number:
            return self.wrap_bool(hint)  # skip building a sympy relational
        return self._new(rel(a, b), bool, hint)

    def eq(self, other):
        return self._compare(other, sympy.Eq, operator.eq)

    def ne(self, other):
        return self._compare(other, sympy.Ne, operator.ne)

    def lt(self, other):
        return self._compare(other, sympy.Lt, operator.lt)

    def le(self, other):
        return self._compare(other, sympy.Le, operator.le)

    def gt(self, other):
        return self._compare(other, sympy.Gt, operator.gt)

    def ge(self, other):
        return self._compare(other, sympy.Ge, operator.ge)

    def sym_and(self, other):
        return self._new(sympy.And(self.expr, other.expr), bool, self.hint and other.hint)

    def sym_or(self, other):
        return self._new(sympy.Or(self.expr, other.expr), bool, self.hint or other.hint)

    and_ = sym_and
    or_ = sym_or

    def sym_not(self):
        return self._new(sympy.Not(self.expr), bool, not self.hint)

    def sym_ite(self, then_node, else_node):
        expr = sympy.Piecewise((then_node.expr, self.expr), (else_node.expr, True))
        hint = then_node.hint if self.hint else else_node.hint
        return self._new(expr, then_node.pytype, hint)

    # Ops sympy cannot express usefully: specialise the operands to their values (guarded).
    def _specialized(self, other, op):
        a = self.guard_int("", 0) if self.pytype is int else self.guard_float("", 0)
        b = other.guard_int("", 0) if other.pytype is int else other.guard_float("", 0)
        r = op(a, b)
        return self.wrap_int(r) if isinstance(r, int) else self.wrap_float(r)

    def lshift(self, other):
        return self._specialized(other, operator.lshift)

    def rshift(self, other):
        return self._specialized(other, operator.rshift)

    def bitwise_and(self, other):
        return self._specialized(other, operator.and_)

    def bitwise_or(self, other):
        return self._specialized(other, operator.or_)

    def bitwise_xor(self, other):
        return self._specialized(other, operator.xor)

    def is_integer(self):
        return self.wrap_bool(float(self.guard_float("", 0)).is_integer())

    def _math(self, fn):
        return self.wrap_float(fn(self.guard_float("", 0)))

    def sym_sqrt(self):
        return self._math(math.sqrt)

    def sym_log2(self):
        return self._math(math.log2)

    def sym_sin(self):
        return self._math(math.sin)

    def sym_cos(self):
        return self._math(math.cos)

    def sym_tan(self):
        return self._math(math.tan)

    def sym_sinh(self):
        return self._math(math.sinh)

    def sym_cosh(self):
        return self._math(math.cosh)

    def sym_tanh(self):
        return self._math(math.tanh)

    def sym_asin(self):
        return self._math(math.asin)

    def sym_acos(self):
        return self._math(math.acos)

    def sym_atan(self):
        return self._math(math.atan)

    # --- layout predicates (C++ asks these of tensors with symbolic sizes) -----------------------
    def _layout(self, sizes, strides, order) -> SymNode:
        sz = [s.expr for s in sizes]
        st = [s.expr for s in strides]
        hint = bool(is_contiguous_expr([s.hint for s in sizes], [s.hint for s in strides], order))
        return self._new(is_contiguous_expr(sz, st, order), bool, hint)

    def is_contiguous(self, sizes, strides):
        return self._layout(sizes, strides, list(range(len(sizes) - 1, -1, -1)))

    def is_channels_last_contiguous_2d(self, sizes, strides):
        if len(sizes) != 4:
            return self.wrap_bool(False)
        return self._layout(sizes, strides, [1, 3, 2, 0])

    def is_channels_last_contiguous_3d(self, sizes, strides):
        if len(sizes) != 5:
            return self.wrap_bool(False)
        return self._layout(sizes, strides, [1, 4, 3, 2, 0])

    def is_channels_last_strides_2d(self, sizes, strides):
        if len(sizes) != 4:
            return self.wrap_bool(False)
        return self._hinted_order_layout(sizes, strides, [1, 3, 2, 0])

    def is_channels_last_strides_3d(self, sizes, strides):
        if len(sizes) != 5:
            return self.wrap_bool(False)
        return self._hinted_order_layout(sizes, strides, [1, 4, 3, 2, 0])

    def _hinted_order_layout(self, sizes, strides, order):
        # "Strides in channels-last order" is about the order of strides, decided on the hints
        # and guarded as a density condition in that order.
        return self._layout(sizes, strides, order)

    def is_non_overlapping_and_dense(self, sizes, strides):
        # Dense in the memory order of the example (dims sorted by hinted stride, then size).
        order = sorted(range(len(sizes)), key=lambda d: (strides[d].hint, sizes[d].hint))
        return self._layout(sizes, strides, order)

    def is_non_overlapping_and_dense_indicator(self, sizes, strides):
        dense = self.is_non_overlapping_and_dense(sizes, strides)
        return self._new(sympy.Piecewise((1, dense.expr), (0, True)), int, 1 if dense.hint else 0)

    # --- turning into Python values (guards) ---------------------------------------------------
    def guard_bool(self, file=None, line=None) -> bool:
        return bool(self.env.evaluate(self.expr, bool(self.hint)))

    def guard_int(self, file=None, line=None) -> int:
        return int(self.env.evaluate(self.expr, int(self.hint)))

    def guard_float(self, file=None, line=None) -> float:
        return float(self.env.evaluate(self.expr, float(self.hint)))

    def expect_true(self, file=None, line=None) -> bool:
        return self.guard_bool(file, line)

    def expect_size(self, file=None, line=None) -> bool:
        return bool(self.env.evaluate(sympy.Ge(self.expr, 0), True))

    def guard_size_oblivious(self, file=None, line=None) -> bool:
        return self.guard_bool(file, line)

    def guard_or_false(self, file=None, line=None) -> bool:
        return self.guard_bool(file, line)

    def guard_or_true(self, file=None, line=None) -> bool:
        return self.guard_bool(file, line)

    def statically_known_true(self, file=None, line=None) -> bool:
        return self.env.static_value(self.expr) is True

    def bool_(self) -> bool:
        return self.guard_bool()

    def int_(self) -> int:
        return self.guard_int()

    def wrap(self):
        """This node as a ``torch.SymInt`` / ``SymFloat`` / ``SymBool``."""
        return _PYTYPE_TO_SYM[self.pytype](self)
