"""A reference interpreter of the loop IR, for tests: runs loop bodies over every index at
once with torch tensors (index variables are broadcast integer tensors), so a lowering's or a
view's output can be compared with ATen without generating code."""

from __future__ import annotations

import sympy
import torch

from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.ops import V
from danlu_inductor.ir.symbols import index_vars

_INDEX_FUNCS = {
    "FloorDiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "IMod": lambda a, b: torch.fmod(torch.as_tensor(a), b),
    "Clamp": lambda a, lo, hi: torch.clamp(torch.as_tensor(a), lo, hi),
    "Max": lambda *a: _fold(torch.maximum, a),
    "Min": lambda *a: _fold(torch.minimum, a),
}
_INDEX_FUNCS["SelectedClamp"] = _INDEX_FUNCS["Clamp"]  # a Clamp the code generator may mask


def _fold(fn, args):
    out = torch.as_tensor(args[0])
    for a in args[1:]:
        out = fn(out, torch.as_tensor(a))
    return out


_UNARY = {
    "round": torch.round,
    "relu": torch.relu,
    "rsqrt": torch.rsqrt,
    "bitwise_not": torch.bitwise_not,
    "logical_not": torch.logical_not,
}
_BINARY = {
    "truediv": torch.true_divide,
    "floordiv": torch.floor_divide,
    "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "mod": torch.remainder,
    "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
}


class Evaluator:
    """``ops`` handler: values are tensors broadcast over the index grid."""

    def __init__(self, memory: dict, env: dict):
        self.memory = memory  # buffer name -> flat storage from its data pointer (1-D tensor)
        self.env = env  # index symbol -> integer tensor
        self._n = 0

    def index(self, expr):
        expr = sympy.sympify(expr)
        free = sorted(expr.free_symbols, key=lambda s: s.name)
        if not free:
            return torch.tensor(int(expr))
        fn = sympy.lambdify(free, expr, modules=[_INDEX_FUNCS, "math"])
        return torch.as_tensor(fn(*[self.env[s] for s in free]))

    def load(self, name, index):
        flat = self.memory[name]
        return flat[self.index(index)]

    def constant(self, value, dtype):
        return torch.tensor(value, dtype=dtype)

    def index_expr(self, expr, dtype):
        return self.index(expr).to(dtype)

    def to_dtype(self, v, dtype):
        return v.to(dtype)

    def where(self, c, a, b):
        return torch.where(c, a, b)

    def indirect_indexing(self, v, size, checked=True):
        s = sympy.Symbol(f"ind{self._n}", integer=True)
        self._n += 1
        v = v.long()
        # unchecked: the lowering promised every value in range (a constant table)
        assert checked or bool(((v >= 0) & (v < int(size))).all()), "unchecked index out of range"
        self.env[s] = torch.where(v < 0, v + int(size), v)
        return s

    def __getattr__(self, name):
        if name in _UNARY:
            return _UNARY[name]
        if name in _BINARY:
            return _BINARY[name]
        fn = getattr(torch, name, None)
        if fn is None:
            raise AttributeError(name)
        return fn


def _grid(sizes, prefix):
    vs = index_vars(prefix, len(sizes))
    if not sizes:
        return {}, []
    grids = torch.meshgrid(*[torch.arange(int(s)) for s in sizes], indexing="ij")
    return dict(zip(vs, grids)), vs


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The storage of ``t`` from its data pointer on, as a 1-D tensor."""
    n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    return torch.as_strided(t, (n,), (1,), t.storage_offset())


def eval_loader(loader, sizes, memory) -> torch.Tensor:
    """``loader`` (an IR node's ``make_loader()``) at every index of ``sizes``."""
    env, vs = _grid([int(s) for s in sizes], "x")
    with V.set_handler(Evaluator(memory, env)):
        out = loader(vs)
    return torch.as_tensor(out).expand([int(s) for s in sizes]).clone()


_REDUCE = {  # over the last dim (the reduced dims flattened into one)
    "sum": lambda v: v.sum(-1),
    "prod": lambda v: v.prod(-1),
    "max": lambda v: v.amax(-1),
    "min": lambda v: v.amin(-1),
    "any": lambda v: v.bool().any(-1),
    "all": lambda v: v.bool().all(-1),
    "welford_mean": lambda v: v.mean(-1),
    "welford_m2": lambda v: ((v - v.mean(-1, keepdim=True)) ** 2).sum(-1),
    "argmax": lambda v: v.argmax(-1),
    "argmin": lambda v: v.argmin(-1),
}


def eval_buffer(buf: ir.ComputedBuffer, memory) -> torch.Tensor:
    """The logical (contiguous) values a ComputedBuffer's loops compute."""
    data = buf.data
    sizes = [int(s) for s in data.ranges]
    if isinstance(data, ir.Pointwise):
        return eval_loader(data.inner_fn, sizes, memory).to(data.dtype)
    rsizes = [int(s) for s in data.rranges]
    env, xv = _grid(sizes + rsizes, "x")
    xs = xv[: len(sizes)]
    rv = index_vars("r", len(rsizes))
    env = {**env, **{r: env.pop(x) for r, x in zip(rv, xv[len(sizes) :])}}
    with V.set_handler(Evaluator(memory, env)):
        vals = torch.as_tensor(data.inner_fn(xs, rv)).expand(sizes + rsizes)
    out = _REDUCE[data.reduction_type](vals.reshape(*sizes, -1))
    return out.to(data.dtype)


def run_graph(graph, inputs: dict) -> dict:
    """Every buffer of a lowered graph, computed in creation order: name -> flat storage."""
    memory = {name: _flat(t) for name, t in inputs.items()}
    for name, value in graph.constants.items():
        memory[name] = _flat(value)
    for buf in graph.buffers:
        if isinstance(buf, ir.ComputedBuffer):
            vals = eval_buffer(buf, memory)
            lay = buf.layout
            n = int(lay.storage_numel())
            store = torch.zeros(max(n, 1), dtype=lay.dtype)
            env, vs = _grid([int(s) for s in lay.size], "x")
            idx = Evaluator(memory, env).index(lay.index(vs)) if vs else torch.tensor(0)
            store[idx.expand(vals.shape).reshape(-1)] = vals.reshape(-1)
            memory[buf.get_name()] = store
        else:
            raise NotImplementedError(f"ir_eval does not run {type(buf).__name__}")
    return memory


def as_tensor(node, memory) -> torch.Tensor:
    """An IR node's (box, view, buffer) logical values."""
    return eval_loader(node.make_loader(), node.get_size(), memory)


class LoweringContext:
    """A GraphLowering with ``tensors`` as its inputs, current while lowerings are called
    directly: ``with LoweringContext(x, y) as (graph, (bx, by)): out = LOWERINGS[op](bx, by)``."""

    def __init__(self, *tensors):
        import torch.fx as fx

        from danlu_inductor.graph import GraphLowering

        g = fx.Graph()
        self.placeholders = [g.placeholder(f"in{i}") for i in range(len(tensors))]
        g.output(tuple(self.placeholders))
        self.tensors = list(tensors)
        self.graph = GraphLowering(fx.GraphModule(torch.nn.Module(), g), self.tensors)

    def __enter__(self):
        self._prev = ir._current.graph
        ir._current.graph = self.graph
        boxes = [self.graph._placeholder(n, t) for n, t in zip(self.placeholders, self.tensors)]
        return self.graph, boxes

    def __exit__(self, *exc):
        ir._current.graph = self._prev

    def values(self, node) -> torch.Tensor:
        """``node``'s values: the graph's realized buffers computed first."""
        memory = run_graph(self.graph, dict(zip(self.graph.graph_input_names, self.tensors)))
        return as_tensor(node, memory)
