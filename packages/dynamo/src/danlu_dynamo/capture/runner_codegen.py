"""The Python function a transformed frame calls: fetch the graph inputs from the frame's
arguments, call the compiled graph, rebuild the Python values that live on, replay side
effects.

Generated as source once per cache entry. The common case (values that are graph outputs,
inputs, constants, or plain tuples/lists/dicts of those, and no side effects) becomes a single
expression, so a cache hit runs no interpretation of rebuild recipes::

    def ___runner(___a0, ___a1):
        ___p = ___sef(None)
        try:
            ___o = ___graph(___a0, ___a0.weight)
            return (___o[0], ___o[1])
        finally:
            ___sef(___p)

Anything else goes through the ``Rebuilder``'s ``ctx -> value`` functions (the same ones the
segment path uses), with the frame state as a ``_RunCtx``.
"""

from __future__ import annotations

import re

import torch

from .exc import Unsupported
from .variables.base import ConstVar
from .variables.containers import DictVar, ListVar, TupleVar
from .variables.symbolic import SymNumVar
from .variables.tensor import TensorVar

_LOCAL = re.compile(r"\bL\[('[^'\\]*')\]")
_FRAME_CELL = re.compile(r"(?<![\w.'])K\[('[^'\\]*')\]")
_CLOSURE_CELL = re.compile(r"(?<![\w.'])C\[(\d+)\]")


class RunCtx:
    __slots__ = ("L", "G", "C", "K", "outs", "memo")

    def __init__(self, L, G, C, K, outs):
        self.L, self.G, self.C, self.K, self.outs = L, G, C, K, outs
        self.memo = {}


def _replay(replays, ctx):
    vals = [(get(ctx), apply) for get, apply in replays]
    for v, apply in vals:
        apply(v)


# one step of an input's read: ``.name`` or a constant subscript (``['key']``, ``[3]``)
_STEP = re.compile(r"\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\]*')\]")
_ROOT = re.compile(r"___a\d+|___cells\[\d+\]")


def _steps(expr: str):
    """``expr`` as (root, [step, ...]) when it is a chain of plain reads from a runner
    parameter (``___a0._modules['model']._parameters['weight']``); else None."""
    m = _ROOT.match(expr)
    if m is None:
        return None
    pos, steps = m.end(), []
    while pos < len(expr):
        step = _STEP.match(expr, pos)
        if step is None:
            return None
        steps.append(step[0])
        pos = step.end()
    return m[0], steps


def hoist_prefixes(exprs: list[str]):
    """(assignments, expressions): every read prefix that two or more of the graph inputs'
    expressions share becomes a local (``___h3 = ___h1._modules['layer1']``), read once.
    A model's parameters are read through the same modules: ResNet-50's 320 inputs took
    about 2,000 dict and attribute reads a call, written out one chain per input (the
    guards, which read the same objects, already share prefixes this way)."""
    chains = [_steps(e) for e in exprs]
    uses: dict = {}
    for chain in chains:
        if chain is None:
            continue
        root, steps = chain
        for k in range(1, len(steps)):  # proper prefixes only
            key = (root, *steps[:k])
            uses[key] = uses.get(key, 0) + 1
    names: dict = {}
    lines = []

    def name_of(key) -> str:
        if len(key) == 1:
            return key[0]
        hit = names.get(key)
        if hit is None:
            hit = names[key] = f"___h{len(names)}"
            lines.append(f"{hit} = {name_of(key[:-1])}{key[-1]}")
        return hit

    out = []
    for expr, chain in zip(exprs, chains):
        if chain is None:
            out.append(expr)
            continue
        root, steps = chain
        k = len(steps) - 1
        while k > 0 and uses.get((root, *steps[:k]), 0) < 2:
            k -= 1
        out.append(name_of((root, *steps[:k])) + "".join(steps[k:]))
    return lines, out


class RunnerBuilder:
    """Collects what the runner returns; ``build`` compiles it."""

    def __init__(self, argnames, cellvars, freevars, f_globals, output, rebuilder, values=None):
        """``cellvars`` + ``freevars``: the original code's cells, in the order the runner's
        ``___cells`` argument holds them (the frame's own cells, then its closure)."""
        self.argnames = list(argnames)
        self.cellvars = list(cellvars)
        self.freevars = list(freevars)
        self.f_globals = f_globals
        self.output = output
        self.cg = rebuilder
        from .output_graph import _SOURCE_ENV

        self.env: dict = {**_SOURCE_ENV, "G": f_globals}
        self._arg_var = {repr(n): f"___a{i}" for i, n in enumerate(self.argnames)}
        self.values = values  # source.FrameValues: quick module attribute reads

    # ------------------------------------------------------------------ expressions
    def expr(self, source_expr: str) -> str:
        """A source expression over L/G/C rewritten to the runner's parameters."""
        if self.values is not None:
            return self.values.render(source_expr, self._root_expr)
        return self._root_expr(source_expr)

    def _root_expr(self, source_expr: str) -> str:

        def local(m):
            v = self._arg_var.get(m[1])
            if v is None:
                raise Unsupported(f"runner reads {m[0]}, which is not an argument of the frame")
            return v

        def frame_cell(m):
            name = eval(m[1])
            if name not in self.cellvars:
                raise Unsupported(f"runner reads an unknown cell {m[0]}")
            return f"___cells[{self.cellvars.index(name)}]"

        text = _LOCAL.sub(local, source_expr)
        text = _FRAME_CELL.sub(frame_cell, text)
        text = _CLOSURE_CELL.sub(lambda m: f"___cells[{len(self.cellvars) + int(m[1])}]", text)
        return text

    def const(self, value) -> str:
        name = f"___k{len(self.env)}"
        self.env[name] = value
        return name

    def render(self, var) -> str | None:
        """One expression for ``var`` when it is simple; None otherwise."""
        t = type(var)
        if t is TensorVar:
            if var.source is not None and var.node.op == "placeholder":
                return self.expr(var.source.expr)
            self.cg.graph_output(var)
            return f"___o[{self.cg._node_index[var.node]}]"
        if t is SymNumVar:  # a size: computed from the inputs' sizes
            from .dynamic import value_expr

            return self.expr(value_expr(var.example))
        if t is ConstVar:
            if type(var.value) in (list, dict, set, bytearray):
                return None
            return self.const(var.value)
        if var.source is not None:
            return None  # an existing container: eager returns the same object
        if t is TupleVar and var.py_type is tuple or t is ListVar and var.py_type is list:
            items = [self.render(i) for i in var.items]
            if any(i is None for i in items):
                return None
            body = "".join(f"{i}, " for i in items)
            return f"({body})" if t is TupleVar else f"[{body}]"
        if t is DictVar and var.py_type is dict:
            parts = []
            for k, v in var.items.items():
                r = self.render(v)
                if r is None:
                    return None
                parts.append(f"{self.const(k)}: {r}")
            return "{" + ", ".join(parts) + "}"
        return None

    # ------------------------------------------------------------------ the function
    def build(self, values, *, as_tuple: bool, compiled_for):
        """Compile the runner returning ``values[0]`` (``as_tuple=False``) or the tuple of
        ``values``. ``compiled_for(graph_outputs)`` finalizes the graph and returns the
        callable to run it (or None when there is nothing to run)."""
        cg = self.cg
        replays = cg.side_effect_replays()
        rendered = None
        if not replays:
            rendered = [self.render(v) for v in values]
            if any(r is None for r in rendered):
                rendered = None
        fns = None if rendered is not None else [cg.rebuild(v) for v in values]
        graph = compiled_for(cg.graph_outputs)
        params = [f"___a{i}" for i in range(len(self.argnames))]
        if self.cellvars or self.freevars:
            params.append("___cells")
        shared, input_exprs = hoist_prefixes([self.expr(s.expr) for s in self.output.input_sources])
        inputs = "".join(f"{e}, " for e in input_exprs)
        lines = [f"def ___runner({', '.join(params)}):"]
        # The whole runner runs with the frame hook off, as torch.compile's compiled code does:
        # the Python functions the compiled graph calls (kernel launchers, autograd runtime) are
        # not user code, and reading inputs, rebuilding objects and replaying side effects may
        # call user methods (__getitem__, properties, constructors) that must run as plain
        # Python — shown to the hook, their own cached code would call back into this runner.
        from .. import eval_frame

        self.env["___sef"] = eval_frame.set_eval_frame
        lines.append("    ___p = ___sef(None)")
        lines.append("    try:")
        if graph is not None:
            self.env["___graph"] = graph
            lines.extend(f"        {line}" for line in shared)
            lines.append(f"        ___o = ___graph({inputs})")
            if self.output.grad_mode_at_end != self.output.grad_mode_at_start:
                self.env["___grad_mode"] = torch._C._set_grad_enabled
                lines.append(f"        ___grad_mode({self.output.grad_mode_at_end})")
        else:
            lines.append("        ___o = ()")
        if rendered is not None:
            if as_tuple:
                lines.append(f"        return ({''.join(r + ', ' for r in rendered)})")
            else:
                lines.append(f"        return {rendered[0]}")
        else:
            self.env.update(___Ctx=RunCtx, ___replay=_replay, ___replays=replays)
            for i, f in enumerate(fns):
                self.env[f"___f{i}"] = f
            pairs = ", ".join(f"{n!r}: ___a{i}" for i, n in enumerate(self.argnames))
            n = len(self.cellvars)
            closure = f"___cells[{n}:]" if self.freevars else "()"
            own = ", ".join(f"{c!r}: ___cells[{i}]" for i, c in enumerate(self.cellvars))
            lines.append(f"        ___x = ___Ctx({{{pairs}}}, G, {closure}, {{{own}}}, ___o)")
            calls = [f"___f{i}(___x)" for i in range(len(fns))]
            if as_tuple:
                lines.append(f"        ___r = ({''.join(c + ', ' for c in calls)})")
            else:
                lines.append(f"        ___r = {calls[0]}")
            if replays:
                lines.append("        ___replay(___replays, ___x)")
            lines.append("        return ___r")
        lines.append("    finally:")
        lines.append("        ___sef(___p)")
        src = "\n".join(lines) + "\n"
        exec(compile(src, "<danlu_dynamo runner>", "exec"), self.env)
        fn = self.env["___runner"]
        fn.source = src
        return fn
