"""The graph under construction, its inputs, guards and side effects, and what runs after it.

A traced segment compiles into a ``CompiledSegment``: fetch the graph inputs from the frame
state, call the backend's compiled graph, rebuild the Python values that are live after the
graph (return value, or stack and locals at a graph break), replay side effects.
"""

from __future__ import annotations

import inspect
import operator
import types

import torch
import torch.fx
from torch.utils import _pytree as pytree

from .builder import wrap_value
from .exc import Unsupported
from .fake import new_mode, run_fake, to_fake
from .guard_codegen import GuardSet
from .source import Source
from .variables.base import ConstVar, Var, is_const_value
from .variables.containers import (
    DictVar,
    ListIteratorVar,
    ListVar,
    SeqVar,
    TupleVar,
)
from .variables.objects import CellVar, ModuleVar, ObjectVar
from .variables.symbolic import SliceVar, SymNumVar, example_of, is_symbolic, node_of, wrap_symbolic
from .variables.tensor import TensorVar


class SideEffects:
    def __init__(self):
        self.mutated: dict[int, Var] = {}  # id(var) -> var, in order of first mutation
        self.globals: dict[str, Var] = {}
        self.new_objects: list[Var] = []
        self.calls: list = []  # functions () -> None replayed after the graph (logging)
        self.class_attrs: dict = {}  # (class, name) -> Var written in the trace

    def replay_call(self, fn):
        self.calls.append(fn)

    def mutate(self, var: Var):
        self.mutated.setdefault(id(var), var)

    def new_object(self, var: Var):
        self.new_objects.append(var)

    def store_global(self, name, var):
        self.globals[name] = var

    def __len__(self):
        n = sum(1 for v in self.mutated.values() if _needs_replay(v))
        return n + len(self.globals) + len(self.calls) + len(self.class_attrs)


def _needs_replay(v) -> bool:
    if isinstance(v, CellVar):
        return v.real is not None
    if isinstance(v, ListIteratorVar):
        return v.source is not None
    if isinstance(v, ObjectVar) and v.value is not None:
        return True
    return getattr(v, "source", None) is not None


class OutputGraph:
    def __init__(self, f_globals, code=None, dynamic=None):
        self.graph = torch.fx.Graph()
        self.guards = GuardSet()
        self.guards.global_state()
        self.side_effects = SideEffects()
        self.input_sources: list[Source] = []
        self.input_values: list[torch.Tensor] = []
        self.f_globals = f_globals
        self._by_id: dict[int, tuple[object, Var]] = {}
        self._cells: dict[int, CellVar] = {}
        self.op_count = 0
        self.grad_mode_at_start = torch.is_grad_enabled()
        # grad mode when the graph ends: a backend that traces the graph (aotautograd) does
        # not replay its set_grad_enabled nodes, so the caller sets it after the graph
        self.grad_mode_at_end = self.grad_mode_at_start
        self._last_placeholder = None
        # Dynamic shapes (``dynamic.DynamicPolicy`` or None): which inputs get symbolic sizes.
        self.dynamic = dynamic
        shape_env = dynamic.new_shape_env() if dynamic is not None else None
        self.shape_env = shape_env
        self.guards.shape_env = shape_env
        self.dynamic_dims: dict[str, tuple] = {}  # source -> symbolic dims
        self._size_nodes: dict = {}
        self._int_inputs: dict[str, Var] = {}  # source -> symbolic int graph input
        self.fake_mode = new_mode(shape_env)
        self.active_ctx: list = []  # autocast contexts entered for real while tracing

    # -------------------------------------------------------------- values
    def wrap(self, value, source: Source | None) -> Var:
        if is_const_value(value) or value is None:
            return wrap_value(self, value, source)
        key = id(value)
        hit = self._by_id.get(key)
        if hit is not None and hit[0] is value:
            var = hit[1]
            if source is not None and var.source is None and isinstance(var, ObjectVar):
                # first met without a path (library code iterating modules), now with one:
                # the object keeps it, so what is read from it (parameters) has a source
                if isinstance(var, ModuleVar):
                    self.guards.id_match(source.expr, value)
                else:
                    self.guards.type_match(source.expr, value)
                var.source = source
                return var
            if source is not None and var.source is not None and source != var.source:
                if isinstance(value, (torch.Tensor, torch.nn.Module)) or not isinstance(
                    var, ConstVar
                ):
                    self.guards.is_same(source.expr, var.source.expr)
            return var
        var = wrap_value(self, value, source)
        if not isinstance(var, ConstVar):
            self._by_id[key] = (value, var)
        return var

    def wrap_const(self, v) -> Var:
        if is_const_value(v):
            return ConstVar(v)
        if isinstance(v, list) and all(is_const_value(x) for x in v):
            return ListVar([ConstVar(x) for x in v])
        if isinstance(v, tuple) and type(v) is tuple:
            return TupleVar([self.wrap_const(x) for x in v])
        if isinstance(v, dict) and type(v) is dict:
            return DictVar({k: self.wrap_const(x) for k, x in v.items()})
        return self.wrap(v, None)

    def int_input(self, value: int, source: Source) -> Var | None:
        """The int argument at ``source`` as a symbolic graph input (a SymInt placeholder),
        or None when the dynamic-shape policy keeps it a constant."""
        hit = self._int_inputs.get(source.expr)
        if hit is not None:
            return hit
        if self.shape_env is None or not self.dynamic.int_symbolic(source.expr, value):
            return None
        sym = self.shape_env.create_symbolic_size(value, source.expr, duck=False)
        self.guards.type_match(source.expr, value)  # the value: the ShapeEnv's range guard
        node = self._new_input(source, value)
        node.meta["example_value"] = sym
        var = SymNumVar(node, sym)
        self._int_inputs[source.expr] = var
        return var

    def real_input(self, expr: str):
        """The real value of the graph input read from source ``expr`` (None if none is)."""
        for source, value in zip(self.input_sources, self.input_values):
            if source.expr == expr:
                return value
        return None

    def _new_input(self, source: Source, value):
        """A placeholder after the last one, named after its source, for ``value``."""
        expr = source.expr
        name = "".join(c if c.isalnum() else "_" for c in expr).strip("_")[:48]
        last = self._last_placeholder
        if last is None:
            first = next(iter(self.graph.nodes), None)
            ctx = (
                self.graph.inserting_before(first)
                if first is not None
                else self.graph.inserting_after()
            )
        else:
            ctx = self.graph.inserting_after(last)
        with ctx:
            node = self.graph.placeholder(f"L{len(self.input_sources)}_{name}")
        self._last_placeholder = node
        self.input_sources.append(source)
        self.input_values.append(value)
        return node

    def tensor_input(self, value: torch.Tensor, source: Source | None) -> TensorVar:
        if source is None:
            raise Unsupported("tensor without a source (a global created elsewhere?)")
        dims = None
        if self.shape_env is not None:
            dims = self.dynamic.dims_for(source.expr, value)
        self.guards.tensor_match(source.expr, value, dynamic=bool(dims))
        node = self._new_input(source, value)
        fake = to_fake(self.fake_mode, value, dims, source.expr)
        if dims:
            self.dynamic_dims[source.expr] = dims
        node.meta["example_value"] = fake  # torch's name for it; "val" is set by TensorVar
        var = TensorVar(node, fake, value.device, source)
        var.is_param = isinstance(value, torch.nn.Parameter)
        return var

    def real_cell(self, cell, source: Source | None) -> CellVar:
        hit = self._cells.get(id(cell))
        if hit is not None:
            return hit
        var = CellVar(source, real=cell)
        self._cells[id(cell)] = var
        return var

    def share_frame_cells(self, cells: dict) -> None:
        """The frame's own cells are also the cells of closures it made earlier (a resume
        function receives both): one symbolic cell per real cell, so a store through one is
        seen by the other."""
        for cell in cells.values():
            if cell.real is not None:
                self._cells.setdefault(id(cell.real), cell)

    # -------------------------------------------------------------- graph ops
    def call_op(self, kind: str, target, args: list, kwargs: dict, ret_self: bool = False) -> Var:
        node_args = tuple(_to_node(a) for a in args)
        node_kwargs = {k: _to_node(v) for k, v in kwargs.items()}
        ex_args = [_to_example(a) for a in args]
        ex_kwargs = {k: _to_example(v) for k, v in kwargs.items()}
        if kind == "call_method":
            fn = getattr(type(ex_args[0]), target, None)
            if fn is None:
                raise Unsupported(f"Tensor has no method {target}")
            result = run_fake(
                self.fake_mode,
                lambda *a, **k: getattr(a[0], target)(*a[1:], **k),
                ex_args,
                ex_kwargs,
            )
        else:
            result = run_fake(self.fake_mode, target, ex_args, ex_kwargs)
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        self.op_count += 1
        if ret_self:
            node.meta["val"] = result
            base = args[0]
            if isinstance(base, TensorVar) and result is base.example:
                return base
            if isinstance(result, torch.Tensor):
                return TensorVar(node, result, result.device)
            if result is None:
                return ConstVar(None)  # keep the node: it mutates its input
        return self._wrap_result(node, result)

    def size_var(self, t: TensorVar, dim: int) -> Var:
        """``t.size(dim)``: a constant, or a ``SymNumVar`` computed by a ``size`` node."""
        v = t.example.shape[dim]
        if not is_symbolic(v):
            return ConstVar(v)
        key = (t.node, dim % t.example.dim())
        node = self._size_nodes.get(key)
        if node is None:
            node = self.graph.create_node("call_method", "size", (t.node, key[1]), {})
            self._size_nodes[key] = node
        return SymNumVar(node, v)

    def shape_var(self, t: TensorVar) -> Var:
        """``t.shape`` as a tuple of sizes (constants or ``SymNumVar``s)."""
        if not is_symbolic(t.example.shape):
            return ConstVar(t.example.shape)
        return TupleVar([self.size_var(t, d) for d in range(t.example.dim())], py_type=torch.Size)

    def prune_size_nodes(self):
        """Drop size computations nothing uses (``x.size(0)`` read only for a branch)."""
        changed = True
        while changed:
            changed = False
            for n in reversed(list(self.graph.nodes)):
                if n.users or not isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat)):
                    continue
                if n.op in ("call_method", "call_function"):
                    self.graph.erase_node(n)
                    self._size_nodes = {k: v for k, v in self._size_nodes.items() if v is not n}
                    changed = True

    def _wrap_result(self, node, result):
        if isinstance(result, torch.Tensor):
            return TensorVar(node, result, result.device)
        if is_symbolic(result) and not any(
            isinstance(r, torch.Tensor) for r in pytree.tree_leaves(result)
        ):
            return wrap_symbolic(self, node, result)
        if isinstance(result, (tuple, list)) and any(
            isinstance(r, torch.Tensor) for r in pytree.tree_leaves(result)
        ):
            node.meta["val"] = result
            items = []
            for i, r in enumerate(result):
                sub = self.graph.create_node("call_function", operator.getitem, (node, i), {})
                items.append(self._wrap_result(sub, r))
            py = type(result)
            if isinstance(result, list):
                return ListVar(items)
            if py is not tuple and not hasattr(py, "_fields"):
                return StructSeqVar(items, py)
            return TupleVar(items, py_type=py)
        if result is None or is_const_value(result) or isinstance(result, (list, tuple)):
            if not node.users and result is not None:
                # A metadata query answered from the example values: no node needed.
                self.graph.erase_node(node)
                self.op_count -= 1
            if isinstance(result, (list, tuple)) and not is_const_value(result):
                if all(is_const_value(x) for x in result):
                    return self.wrap_const(result)
                raise Unsupported("op returned a non-constant Python container")
            return ConstVar(result)
        raise Unsupported(f"op returned {type(result).__name__}")

    def set_grad_mode(self, mode: bool):
        torch._C._set_grad_enabled(mode)
        self.grad_mode_at_end = mode
        self.graph.create_node("call_function", torch._C._set_grad_enabled, (mode,), {})

    def restore_global_state(self):
        for ctx in reversed(self.active_ctx):
            ctx.abandon()
        self.active_ctx.clear()
        torch._C._set_grad_enabled(self.grad_mode_at_start)

    def num_ops(self) -> int:
        """Tensor operations in the graph (unpacking a multi-output op is not one)."""
        n_ops = 0
        for n in self.graph.nodes:
            if n.op not in ("call_function", "call_method"):
                continue
            if n.target is operator.getitem and not isinstance(
                n.args[0].meta.get("val"), torch.Tensor
            ):
                continue
            n_ops += 1
        return n_ops


class StructSeqVar(TupleVar):
    """``torch.return_types.*`` (e.g. ``torch.max(x, dim)``): a tuple with named fields."""

    def __init__(self, items, py_type):
        super().__init__(items)
        self.struct_type = py_type

    def getattr(self, tx, name):
        fields = [
            f
            for f in dir(self.struct_type)
            if not f.startswith("_")
            and f not in ("count", "index", "n_fields", "n_sequence_fields", "n_unnamed_fields")
        ]
        order = getattr(self.struct_type, "__match_args__", None) or fields
        if name in order:
            return self.items[list(order).index(name)]
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        parts = [cg.rebuild(i) for i in self.items]
        t = self.struct_type
        return lambda ctx: t([p(ctx) for p in parts])


def _plain(value):
    """A NumPy scalar as the Python number torch takes it for (graph code names no numpy)."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _to_node(v):
    if isinstance(v, TensorVar):
        return v.node
    if isinstance(v, (SymNumVar, SliceVar)):
        return node_of(v)
    if isinstance(v, ConstVar):
        return _plain(v.value)
    if isinstance(v, SeqVar) and v.py_type in (tuple, list, torch.Size):
        items = [_to_node(i) for i in v.items]
        return items if v.py_type is list else tuple(items)
    if isinstance(v, DictVar) and v.py_type is dict:
        return {k: _to_node(i) for k, i in v.items.items()}
    if v.is_const():
        return v.const()
    raise Unsupported(f"cannot pass {v} to a torch operation")


def _to_example(v):
    if isinstance(v, TensorVar):
        return v.example
    if isinstance(v, (SymNumVar, SliceVar)):
        return example_of(v)
    if isinstance(v, ConstVar):
        return _plain(v.value)
    if isinstance(v, SeqVar):
        items = [_to_example(i) for i in v.items]
        return items if v.py_type is list else tuple(items)
    if isinstance(v, DictVar):
        return {k: _to_example(i) for k, i in v.items.items()}
    return v.const()


def _result_device(args, kwargs):
    for a in [*args, *kwargs.values()]:
        if isinstance(a, TensorVar):
            return a.device
        if isinstance(a, SeqVar):
            for i in a.items:
                if isinstance(i, TensorVar):
                    return i.device
    dev = kwargs.get("device")
    if dev is not None and dev.is_const() and dev.const() is not None:
        return torch.device(dev.const())
    return torch.device("cpu")


# ------------------------------------------------------------------ rebuilding values


class Rebuilder:
    """Turns symbolic values into functions ``ctx -> real value`` run after the graph."""

    def __init__(self, output: OutputGraph):
        self.output = output
        self.graph_outputs: list = []  # fx nodes returned by the graph
        self._node_index: dict = {}
        self._cache: dict[int, object] = {}
        self._source_fns: dict[str, object] = {}
        self.trace_cells: list = []  # (cell fn, contents fn) for cells made in the trace
        # Frame-hook code: the closure's cells are read from the running frame (``C``), not
        # the cells seen while tracing (another function object may share the code).
        self.runtime_cells = False

    def rebuild(self, var: Var):
        key = id(var)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        fn = var.reconstruct(self)
        if not isinstance(var, (ConstVar, TensorVar)) and var.source is None:
            # An object made in the trace: build it once per run so every reference shares it.
            inner = fn

            def fn(ctx, _inner=inner, _k=key):
                memo = ctx.memo
                if _k not in memo:
                    memo[_k] = _inner(ctx)
                return memo[_k]

        self._cache[key] = fn
        return fn

    def from_source(self, source: Source):
        f = self._source_fns.get(source.expr)
        if f is None:
            f = compile_source(source.expr)
            self._source_fns[source.expr] = f
        return lambda ctx, _f=f: _f(ctx.L, ctx.G, ctx.C, ctx.K)

    def graph_output(self, var: TensorVar):
        if var.source is not None and var.node.op == "placeholder":
            return self.from_source(var.source)
        idx = self._node_index.get(var.node)
        if idx is None:
            idx = len(self.graph_outputs)
            self.graph_outputs.append(var.node)
            self._node_index[var.node] = idx
        return lambda ctx, _i=idx: ctx.outs[_i]

    def _cell_from_source(self, cell: CellVar) -> bool:
        """Read a real cell through its source at run time: always for a cell reached from
        a value (``L['f'].__closure__[0]``: functions made per call share one cache entry,
        guarded by their code), and for the frame's own cells on the frame-hook path."""
        if cell.source is None:
            return False
        return self.runtime_cells or not cell.source.expr.startswith(("C[", "K["))

    def real_cell(self, cell: CellVar):
        key = ("cell", id(cell))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if cell.real is not None and self._cell_from_source(cell):
            fn = self.from_source(Source(cell.source.expr))
        elif cell.real is not None:
            real = cell.real
            fn = lambda ctx: real  # noqa: E731
        elif cell.source is not None:
            fn = self.from_source(Source(cell.source.expr))
        else:
            # A cell made in the trace (MAKE_CELL): one fresh cell per run, filled with its
            # last contents when it is made (memoised first: the contents may hold a function
            # closing over this cell). Filling it in the replays missed cells first met while
            # rebuilding the returned values (a closure returned by an inlined function).
            filler = []

            def fn(ctx, _k=key, _filler=filler):
                memo = ctx.memo
                if _k not in memo:
                    c = memo[_k] = types.CellType()
                    for contents in _filler:
                        c.cell_contents = contents(ctx)
                return memo[_k]

            if cell.contents is not None:
                self._cache[key] = fn  # before the contents, which may close over this cell
                filler.append(self.rebuild(cell.contents))
        self._cache[key] = fn
        return fn

    def side_effect_replays(self):
        """Functions ``ctx -> None``; their inputs are rebuilt before any of them runs."""
        out = []
        se = self.output.side_effects
        for call in se.calls:
            out.append((_NONE, lambda _, call=call: call()))
        for var in se.mutated.values():
            if not _needs_replay(var):
                continue
            if isinstance(var, CellVar):
                if var.contents is None:
                    continue
                val = self.rebuild(var.contents)
                if self._cell_from_source(var):
                    get = self.from_source(Source(var.source.expr))
                    out.append((_pair(get, val), lambda p: setattr(p[0], "cell_contents", p[1])))
                    continue
                cell = var.real
                out.append((val, lambda x, cell=cell: setattr(cell, "cell_contents", x)))
            elif isinstance(var, ListIteratorVar) and var.base_index is None:
                it = self.from_source(var.source)  # a dict iterator: no __setstate__
                out.append((it, lambda i, n=var.index: _advance(i, n)))
            elif isinstance(var, ListIteratorVar):
                it = self.from_source(var.source)
                idx = var.base_index + var.index
                out.append((it, lambda i, n=idx: i.__setstate__(n)))
            elif isinstance(var, ObjectVar):
                if var.source is not None:
                    obj = self.from_source(var.source)
                else:
                    obj = lambda ctx, _v=var.value: _v  # noqa: E731
                for name, v in var.pending.items():
                    val = self.rebuild(v)
                    out.append((_pair(obj, val), lambda p, n=name: setattr(p[0], n, p[1])))
                for name in var.deleted:
                    out.append((obj, lambda o, n=name: delattr(o, n)))
            elif hasattr(var, "replay_mutation"):
                out.append(var.replay_mutation(self))
            elif isinstance(var, ListVar) and var.lazy is not None:
                # only appended to: extend the list as it is at run time
                obj = self.from_source(var.source)
                items = [self.rebuild(i) for i in var.appended]
                out.append(
                    (
                        _pair(obj, lambda ctx, items=items: [i(ctx) for i in items]),
                        lambda p: p[0].extend(p[1]),
                    )
                )
            elif isinstance(var, ListVar):
                obj = self.from_source(var.source)
                items = [self.rebuild(i) for i in var.items]
                out.append(
                    (
                        _pair(obj, lambda ctx, items=items: [i(ctx) for i in items]),
                        lambda p: p[0].__setitem__(slice(None), p[1]),
                    )
                )
            elif isinstance(var, DictVar):
                obj = self.from_source(var.source)
                items = {k: self.rebuild(i) for k, i in var.items.items()}
                out.append(
                    (
                        _pair(obj, lambda ctx, items=items: {k: i(ctx) for k, i in items.items()}),
                        _dict_replace,
                    )
                )
            else:
                raise Unsupported(f"cannot replay a mutation of {var}")
        from .variables.class_state import class_attr_replays

        out.extend(class_attr_replays(self, se))
        for cell_fn, val in self.trace_cells:
            out.append((_pair(cell_fn, val), lambda p: setattr(p[0], "cell_contents", p[1])))
        for name, var in se.globals.items():
            val = self.rebuild(var)
            out.append((val, lambda x, n=name, g=self.output.f_globals: g.__setitem__(n, x)))
        return out


def _NONE(ctx):
    return None


def _advance(it, n):
    for _ in range(n):
        next(it)


def _pair(a, b):
    return lambda ctx: (a(ctx), b(ctx))


def _dict_replace(p):
    d, items = p
    d.clear()
    d.update(items)


_SOURCE_ENV = {
    "__name__": "danlu_dynamo.generated",
    "inspect": inspect,
    "torch": torch,
    "types": types,
    "sys": __import__("sys"),
}


def compile_source(expr: str):
    return eval(f"lambda L, G, C, K: {expr}", dict(_SOURCE_ENV))


__all__ = ["OutputGraph", "Rebuilder", "compile_source", "ModuleVar", "ObjectVar"]
