"""The ``ops`` set: what a loop body may call, and the handler it is dispatched to.

A body is a plain Python function of sympy indices that calls ``ops.load``, ``ops.add``, ...
The same body is run under different handlers: the C++ code generator (values are C++
variables), the dependency recorder (records loads), the IR printer (values are text).
``V.set_handler(h)`` scopes a handler; ``ops.<name>`` forwards to the current one.
"""

from __future__ import annotations

import contextlib
import threading

# name -> number of value operands (loads/index_expr/constant have their own signatures).
UNARY = (
    "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
    "cosh tanh asinh acosh atanh erf erfc lgamma sigmoid reciprocal floor ceil trunc round "
    "sign signbit isnan isinf logical_not bitwise_not relu"
).split()
BINARY = (
    "add sub mul truediv floordiv truncdiv mod fmod pow maximum minimum fmax fmin atan2 hypot "
    "copysign nextafter eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and "
    "bitwise_or bitwise_xor lshift rshift"
).split()
SPECIAL = ("load", "index_expr", "constant", "to_dtype", "where", "indirect_indexing")
ALL_OPS = (*SPECIAL, *UNARY, *BINARY)

# Ops whose CPU cost justifies keeping a shared result in memory instead of recomputing it.
HEAVY = frozenset(
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
    "acosh atanh erf erfc lgamma sigmoid pow atan2 hypot".split()
)
# heavy on a CPU, cheap in a GPU kernel: one or two special-function instructions in fp32
# (tl.exp, tl.log, ...), next to a memory-bound kernel's loads and stores
GPU_CHEAP_MATH = frozenset("exp exp2 log log2 sigmoid".split())


class _State(threading.local):
    def __init__(self):
        self.handler = None


_state = _State()


class V:
    @staticmethod
    @contextlib.contextmanager
    def set_handler(handler):
        prev = _state.handler
        _state.handler = handler
        try:
            yield handler
        finally:
            _state.handler = prev

    @staticmethod
    def handler():
        if _state.handler is None:
            raise RuntimeError("ops.* called outside a handler scope")
        return _state.handler


class _Ops:
    """``ops.add(a, b)`` -> ``current_handler.add(a, b)``."""

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(f"'{name}' is not in the ops set")
        fn = _forwarders.get(name)
        if fn is None:

            def fn(*args, **kwargs):
                return getattr(V.handler(), name)(*args, **kwargs)

            fn.__name__ = name
            _forwarders[name] = fn
        return fn


_forwarders: dict = {}
ops = _Ops()


class OpCounter:
    """Counts ops and loads; used to decide when a shared value should be stored."""

    def __init__(self):
        self.count = 0
        self.loads = 0
        self.heavy_ops: set[str] = set()  # the costly math ops the body uses
        self.names = set()
        self.distinct_loads = set()  # (buffer, index): a value loaded twice costs one read

    @property
    def heavy(self) -> bool:
        """Any costly math at all (the CPU's rule; GPU graphs look at ``heavy_ops``)."""
        return bool(self.heavy_ops)

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(name)

        def op(*args, **kwargs):
            self.count += 1
            if name == "load":
                self.loads += 1
                self.names.add(args[0])
                self.distinct_loads.add((args[0], str(args[1])))
            if name in HEAVY:
                self.heavy_ops.add(name)
            if name == "indirect_indexing":
                import sympy

                return sympy.Symbol(f"ind{self.count}", integer=True)
            return None

        return op


class Printer:
    """Renders a body as readable pseudo-code lines (the loop IR dump)."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0

    def _emit(self, text):
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{name} = {text}")
        return name

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(name)

        def op(*args):
            if name == "indirect_indexing":
                import sympy

                known = "" if len(args) < 3 or args[2] else ", in range"
                self.lines.append(f"i_{args[0]} = indirect({args[0]}, {args[1]}{known})")
                return sympy.Symbol(f"i_{args[0]}", integer=True)
            if name == "to_dtype":
                return self._emit(f"to_dtype({args[0]}, {str(args[1]).replace('torch.', '')})")
            if name in ("constant", "index_expr"):
                return self._emit(f"{name}({args[0]}, {str(args[1]).replace('torch.', '')})")
            return self._emit(f"{name}({', '.join(str(a) for a in args)})")

        return op
