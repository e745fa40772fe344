"""Dynamic shapes: which input sizes a trace makes symbolic, and the guards that follow.

``optimize(..., dynamic=)``:

- ``None`` (default, "automatic dynamic"): a frame is first traced with static sizes. Each
  capture remembers, per code object and input source, the sizes it saw; when a later capture
  of the same code sees a different size (a recompile after a size guard failed), that
  dimension becomes symbolic from then on, so one more entry serves every later size.
- ``True``: every dimension of every input tensor is symbolic from the first trace.
- ``False``: always static (marks are ignored).

``mark_dynamic(t, dim)`` / ``mark_static(t, dim)`` mark a tensor's dimensions before the call
(honoured with ``None`` and ``True``). Parameters and buffers of modules stay static. Sizes 0
and 1 are always specialised (ShapeEnv), so a size-1 input recompiles.

Python ints that are the frame's own arguments or locals (``L['n']``) follow the same rules:
with ``None`` an int whose value changed between captures becomes a symbolic graph input (a
SymInt placeholder) from then on, with ``True`` from the first trace. Only values >= 2 are
made symbolic; 0, 1, negative values, bools and ints read from attributes or globals stay
constants guarded by value.

For a symbolic input the exact shape/stride guard is replaced by the ShapeEnv's guards over
the input's sizes and strides: value ranges, input checks (static dims, strides, 0/1
specialisations) and the guards recorded by branches on sizes (``L['x'].size(0) > 16``).
"""

from __future__ import annotations

import re

import sympy
import torch
from sympy.printing.pycode import PythonCodePrinter

from danlu_primtorch.symbolic import ShapeEnv
from danlu_primtorch.symbolic.shape_env import MAX_SIZE


def mark_dynamic(t: torch.Tensor, dim) -> None:
    """Make ``t``'s dimension ``dim`` (an int or a list of ints) symbolic when captured."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    _mark(t, dims, "_danlu_dynamic_dims", "_danlu_static_dims")


def mark_static(t: torch.Tensor, dim=None) -> None:
    """Keep ``t``'s dimension ``dim`` (an int, a list, or None for all) static when captured."""
    dims = range(t.dim()) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    _mark(t, dims, "_danlu_static_dims", "_danlu_dynamic_dims")


def _mark(t: torch.Tensor, dims, into: str, out_of: str) -> None:
    """Add ``dims`` to ``t``'s marks ``into`` and take them out of the opposite marks."""
    marks = set(getattr(t, into, ()))
    marks.update(d % max(t.dim(), 1) for d in dims)
    setattr(t, into, marks)
    other = getattr(t, out_of, None)
    if other:
        setattr(t, out_of, other - marks)


# Tensors read as attributes (module parameters and buffers, ``L['self'].bn.running_mean``)
# stay static unless marked: they do not change size between calls, and a symbolic weight
# would only cost guards.
_STATIC_SOURCE = re.compile(r"[\]\)]\.[A-Za-z_]|getattr\(|\._parameters\[|\._buffers\[")
# Ints made symbolic: the frame's own arguments and locals, and items of containers passed
# in (``L['args'][1]``, ``L['kwargs']['n']``), never attributes or globals.
_FRAME_LOCAL = re.compile(r"L\['\w+'\](\[(\d+|'\w+')\])*")


class DynamicPolicy:
    """Decides per input tensor which dims are symbolic, for one capture of one code object.

    ``memory`` (per code object, owned by the capture context) maps an input source to
    ``(sizes seen last, dims made dynamic)``; ``commit()`` updates it after the capture."""

    def __init__(self, mode, memory: dict):
        self.mode = mode  # None | True | False
        self.memory = memory
        self.seen: dict[str, tuple] = {}
        self.seen_ints: dict[str, tuple[int, bool]] = {}  # source -> (value, made symbolic)
        self.notes: list[str] = []  # "L['x'].size(0): 16 -> 24, made dynamic"
        self.disabled = False  # a trace fell back to static sizes
        self.used = False  # some input got symbolic sizes

    @property
    def active(self) -> bool:
        return self.mode is not False and not self.disabled

    def new_shape_env(self):
        return ShapeEnv(duck_shape=False) if self.active else None

    def dims_for(self, source: str, t: torch.Tensor) -> tuple | None:
        if not self.active:
            return None
        marked = set(getattr(t, "_danlu_dynamic_dims", ()))
        if not marked and (isinstance(t, torch.nn.Parameter) or _STATIC_SOURCE.search(source)):
            return None
        sizes = tuple(t.shape)
        self.seen[source] = sizes
        dims = marked
        if self.mode is True:
            dims = set(range(t.dim()))
        else:
            prev = self.memory.get(source)
            if prev is not None and len(prev[0]) == len(sizes):
                dims |= prev[1]
                for d, (a, b) in enumerate(zip(prev[0], sizes)):
                    if a != b and d not in prev[1]:
                        dims.add(d)
                        note = f"{source}.size({d}): {a} -> {b}, made dynamic"
                        if note not in self.notes:
                            self.notes.append(note)
        dims -= set(getattr(t, "_danlu_static_dims", ()))
        dims = {d for d in dims if d < t.dim()}
        if dims:
            self.used = True
        return tuple(sorted(dims)) or None

    def int_symbolic(self, source: str, value: int) -> bool:
        """Whether the int at ``source`` (a frame local) becomes a symbolic graph input."""
        if not self.active or not _FRAME_LOCAL.fullmatch(source):
            return False
        prev = self.memory.get(("int", source))
        if self.mode is True:
            symbolic = True
        elif prev is None:
            symbolic = False
        else:
            symbolic = prev[1] or prev[0] != value
            note = f"{source}: {prev[0]} -> {value}, made dynamic"
            if symbolic and not prev[1] and note not in self.notes:
                self.notes.append(note)
        symbolic = symbolic and value >= 2
        self.seen_ints[source] = (value, symbolic)
        self.used = self.used or symbolic
        return symbolic

    def note_specialised(self, env) -> None:
        """Sizes the trace turned back into constants (``int(n)``, ``range(n)``, a meta kernel
        that needs a concrete size): each is guarded by ``Eq``, so a new value recompiles."""
        if env is None:
            return
        for sym, value in env.replacements.items():
            if getattr(value, "is_Integer", False):
                note = f"{env.source_of(sym)} specialised to {int(value)} by the program"
                if note not in self.notes:
                    self.notes.append(note)

    def commit(self, dynamic_dims: dict):
        """Remember the sizes this capture saw and the dims it made symbolic."""
        for source, sizes in self.seen.items():
            prev = self.memory.get(source)
            dims = set(dynamic_dims.get(source, ()))
            if prev is not None and len(prev[0]) == len(sizes):
                dims |= prev[1]
            self.memory[source] = (sizes, frozenset(dims))
        for source, (value, symbolic) in self.seen_ints.items():
            prev = self.memory.get(("int", source))
            self.memory[("int", source)] = (value, symbolic or (prev is not None and prev[1]))


# ------------------------------------------------------------------ guards


class _Printer(PythonCodePrinter):
    """sympy -> Python over the sources (symbols are named by their source expression)."""

    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) // ({self._print(e.args[1])}))"

    def _print_Mod(self, e):
        return f"(({self._print(e.args[0])}) % ({self._print(e.args[1])}))"

    def _print_Symbol(self, e):
        return e.name


_printer = _Printer()


def value_expr(value) -> str:
    """Python text computing a SymInt/SymFloat from the frame's sources
    (``L['x'].size(1) * 2``): how a size that lives on after the graph is rebuilt, so graphs
    never return sizes."""
    from danlu_primtorch.symbolic import sym_expr

    node = value.node
    env = node.env
    expr = sym_expr(value)
    names = {s: sympy.Symbol(env.source_of(s)) for s in expr.free_symbols}
    text = _printer.doprint(expr.xreplace(names))
    return f"float({text})" if isinstance(value, torch.SymFloat) else f"int({text})"


def _tensor_of(src: str) -> str:
    for kind in (".size(", ".stride("):
        head, sep, _ = src.rpartition(kind)
        if sep:
            return head
    return src


def shape_guards(env: ShapeEnv) -> list[tuple[str, str, tuple, str]]:
    """The env's ranges, input checks and guards as ``(source, python expr, other sources,
    description)``, expressions over the sources (``L['x'].size(0) > 16``)."""
    names = {s: sympy.Symbol(srcs[0]) for s, srcs in env.var_to_sources.items()}

    def py(expr):
        return _printer.doprint(sympy.sympify(expr).xreplace(names))

    def entry(expr_text, srcs, desc):
        tensors = sorted({_tensor_of(s) for s in srcs}, key=len, reverse=True)
        return (tensors[0] if tensors else "", expr_text, tuple(tensors[1:]), desc)

    out = []
    for sym, srcs in env.var_to_sources.items():
        if sym in env.replacements:
            continue
        lo, hi = env.var_to_range[sym]
        src = srcs[0]
        text = f"{int(lo)} <= {src}" + ("" if hi >= MAX_SIZE else f" <= {int(hi)}")
        out.append(entry(text, [src], text))
    for c in env.input_checks:
        syms = sympy.sympify(c.expr).free_symbols
        srcs = [c.source] + [env.source_of(s) for s in syms]
        text = f"{c.source} == {py(c.expr)}"
        out.append(entry(text, srcs, text))
    for g in env.guards:
        srcs = [env.source_of(s) for s in g.expr.free_symbols]
        out.append(entry(py(g.expr), srcs, g.format()))
    return out
