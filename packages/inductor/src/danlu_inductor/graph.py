"""GraphLowering: runs an ATen-level FX graph, calling one lowering per node, to build IR."""

from __future__ import annotations

import logging
import operator
from collections import Counter

import sympy
import torch
from torch.utils import _pytree as pytree

from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.layout import FixedLayout, strides_for_order
from danlu_inductor.ir.symbols import (
    DynamicShapeUnsupported,
    FloorDiv,
    IMod,
    as_exprs,
    hint,
    size_hints,
)
from danlu_inductor.lowering import LOWERINGS, NotLowered
from danlu_inductor.lowering.convolution import (
    channels_last_strides,
    memory_orders,
    nodes_preferring_channels_last,
)
from danlu_inductor.lowering.extern import make_extern
from danlu_inductor.lowering.registry import is_node
from danlu_inductor.passes.pad_matmul import ALIGN, padded_row_strides

log = logging.getLogger("danlu_inductor")


class GraphLowering:
    """``force_fallback``: FX node names that run as ATen fallback kernels even when a
    lowering exists (a backend failed to build a kernel for a group they were fused into)."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs,
        force_fallback=(),
        for_gpu=False,
        conv_channels_last=False,
        row_block_partials=True,
    ):
        self.gm = gm
        # column sums beside a row reduction of the same values split by the row kernel's
        # block of rows, to join it (lowering/row_block_partials.py; GPU graphs)
        self.row_block_partials = row_block_partials
        # GPU graphs: a pointwise result stored in memory takes the strides eager gives it
        # (channels-last stays channels-last) instead of contiguous ones, reductions with few
        # outputs run in two stages (lowering/reductions.py), and values shared by several
        # consumers are recomputed unless expensive (ir/nodes.py)
        self.for_gpu = for_gpu
        self.force_fallback = frozenset(force_fallback)
        # convolutions and the image-shaped values around them channels-last
        # (lowering/convolution.py)
        self.conv_channels_last = conv_channels_last
        self.prefer_channels_last = (
            nodes_preferring_channels_last(gm) if conv_channels_last else set()
        )
        # the memory order values derived from channels-last ones have here, where it is
        # not eager's (a permutation of a channels-last value; lowering/convolution.py)
        self.memory_orders = (
            memory_orders(gm, self.prefer_channels_last) if conv_channels_last else {}
        )
        # outputs from this position on go only to the backward (the forward graph of a
        # training step): they keep the layout chosen here instead of eager's
        self.free_outputs_from = gm.meta.get("saved_for_backward_from")
        # the caller calls with the example inputs' exact sizes and strides (aotautograd's
        # static programs; True for every input, or one flag per input: a backward's saved
        # values): the wrapper does not check those inputs' layouts again
        fixed = gm.meta.get("input_layouts_fixed")
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        if isinstance(fixed, (list, tuple)):
            self.fixed_layout_inputs = {n for n, f in zip(placeholders, fixed) if f}
        else:
            self.fixed_layout_inputs = set(placeholders) if fixed else set()
        # output position -> the input (placeholder name) whose new value it is: the wrapper
        # may compute it into that input (aotautograd's written inputs; write_back then
        # leaves it alone)
        into = gm.meta.get("outputs_into_inputs") or {}
        self.outputs_into_inputs = {
            k: placeholders[i] for k, i in into.items() if 0 <= i < len(placeholders)
        }
        self.into_inputs: dict[str, str] = {}  # output buffer name -> input name (filled below)
        self.example_inputs = list(example_inputs)
        self.buffers: list[ir.Buffer] = []
        self.name_to_buffer: dict[str, ir.Buffer] = {}
        self.graph_inputs: dict[str, ir.InputBuffer] = {}
        self.graph_input_names: list[str] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.graph_outputs: list = []
        self.fallbacks: Counter = Counter()
        # ATen op -> why it runs as a fallback kernel (the first reason seen)
        self.fallback_reasons: dict[str, str] = {}
        self.externs: Counter = Counter()
        self.lowered: Counter = Counter()
        self.current_node: torch.fx.Node | None = None
        self._counter = 0
        # dynamic shapes: the trace's ShapeEnv; symbol -> where the wrapper reads it at run
        # time ("primals_0.size(1)", or the name of an int input)
        self.shape_env = gm.meta.get("shape_env")
        self.size_sources: dict[sympy.Symbol, str] = {}
        self.sym_outputs: list[int] = []  # output positions that are sizes (returned as int)
        # floor divisions / moduli of sizes whose operands the value ranges do not prove
        # non-negative: computed by the wrapper (Python semantics) and passed to the kernels
        # as sizes of their own (the kernels' index math truncates like C)
        self.derived_sizes: dict[sympy.Symbol, sympy.Expr] = {}
        self._derived_of: dict[sympy.Expr, sympy.Symbol] = {}
        self._hint_values = dict(self.shape_env.var_to_val) if self.shape_env else None

    # ---------------------------------------------------------------- symbolic sizes
    @property
    def is_dynamic(self) -> bool:
        return self.shape_env is not None and bool(self.size_sources)

    def hint_values(self) -> dict | None:
        return self._hint_values  # one dict: derived sizes add their hints to it

    def to_expr(self, v):
        """A size of the trace (int or ``torch.SymInt``) as an index expression (the ShapeEnv's
        known equalities applied, its floor division and modulo as index functions)."""
        if isinstance(v, (int, sympy.Basic)) and not isinstance(v, bool):
            return sympy.sympify(v)
        if not isinstance(v, torch.SymInt):
            raise DynamicShapeUnsupported(f"size value {v!r}")
        from danlu_primtorch.symbolic import FloorDiv as PtFloorDiv
        from danlu_primtorch.symbolic import sym_expr

        try:
            e = sym_expr(v)
        except TypeError as err:
            raise DynamicShapeUnsupported(str(err)) from err
        if self.shape_env is None:
            raise DynamicShapeUnsupported(f"symbolic size {e} in a graph without a shape_env")
        e = self.shape_env.simplify(sympy.sympify(e))
        # the index printers divide with C semantics (truncation): fine for operands that
        # are never negative, which the trace's value ranges must prove
        derived = {}
        for f in e.atoms(PtFloorDiv, sympy.Mod):
            a, b = f.args
            if self.shape_env.static_value(sympy.And(a >= 0, b > 0)) is not True:
                derived[f] = self._derived(f)
        if derived:
            e = e.xreplace(derived)
        return e.replace(PtFloorDiv, FloorDiv).replace(sympy.Mod, IMod)

    def trace_expr(self, e):
        """``to_expr``'s index functions turned back into the ShapeEnv's floor division and
        modulo, for its range decisions (exact: index functions take non-negative operands)."""
        from danlu_primtorch.symbolic import FloorDiv as PtFloorDiv

        return sympy.sympify(e).replace(IMod, sympy.Mod).replace(FloorDiv, PtFloorDiv)

    def _derived(self, f):
        """A size symbol standing for ``f`` (Python floor semantics, evaluated by the wrapper);
        named like the ShapeEnv's symbols (``s<k>``, from a range of its own) so that every
        printer treats it as a size argument."""
        from danlu_primtorch.symbolic import FloorDiv as PtFloorDiv

        sym = self._derived_of.get(f)
        if sym is None:
            sym = sympy.Symbol(f"s{900000 + len(self._derived_of)}", integer=True)
            # printed by the wrapper in Python, where // and % floor: exact for any sign
            source = f.replace(PtFloorDiv, FloorDiv).replace(sympy.Mod, IMod)
            self._derived_of[f] = sym
            self.derived_sizes[sym] = source
            self.size_sources[sym] = "<derived>"
            self._hint_values[sym] = int(self.shape_env.hint_of(f))
        return sym

    def to_exprs(self, vs):
        return [self.to_expr(v) for v in vs]

    def size_value(self, v):
        """A size argument for lowerings: a Python int when static, else its expression."""
        e = self.to_expr(v)
        return int(e) if e.is_Integer else e

    def _bind(self, expr, source):
        if isinstance(expr, sympy.Symbol) and expr not in self.size_sources:
            self.size_sources[expr] = source

    # ---------------------------------------------------------------- buffer registry
    def register_buffer(self, buf: ir.Buffer) -> str:
        if buf.name is None:
            buf.name = f"buf{self._counter}"
            self._counter += 1
        if self.current_node is not None and self.current_node.name not in buf.origins:
            buf.origins.append(self.current_node.name)
        data = getattr(buf, "data", None)
        for o in sorted(getattr(data, "origins", ())):
            if o not in buf.origins:
                buf.origins.append(o)
        self.buffers.append(buf)
        self.name_to_buffer[buf.name] = buf
        return buf.name

    # ---------------------------------------------------------------------- running
    def run(self):
        with size_hints(self.hint_values()):
            return self._run()

    def _run(self):
        prev = ir._current.graph
        ir._current.graph = self
        try:
            env = {}
            inputs = iter(self.example_inputs)
            users = {n: len(n.users) for n in self.gm.graph.nodes}
            for node in self.gm.graph.nodes:
                self.current_node = node
                if node.op == "placeholder":
                    env[node] = self._placeholder(node, next(inputs))
                elif node.op == "get_attr":
                    env[node] = self._constant(node)
                elif node.op == "call_function":
                    args, kwargs = pytree.tree_map(
                        lambda a: env[a] if isinstance(a, torch.fx.Node) else a,
                        (node.args, node.kwargs),
                    )
                    result = self._call(node, args, kwargs)
                    self._tag_origins(result, node.name)
                    if node in self.prefer_channels_last:
                        self._prefer_channels_last(result, (args, kwargs))
                    self._prefer_eager_strides(node, result, (args, kwargs))
                    if users[node] > 1:
                        for r in pytree.tree_leaves(result):
                            if isinstance(r, ir.StorageBox):
                                r.maybe_realize_for_reuse()
                    env[node] = result
                elif node.op == "output":
                    self._outputs(node, env)
                else:
                    raise NotImplementedError(f"FX op {node.op} ({node.name})")
            self.current_node = None
        finally:
            ir._current.graph = prev
        return self

    @staticmethod
    def _prefer_channels_last(result, inputs):
        """A new 4-D value of a node in ``prefer_channels_last``: stored channels-last if it
        is ever stored (a tuple's parts too: max pooling's values and indices)."""
        passed = {id(a) for a in pytree.tree_leaves(inputs)}
        for r in pytree.tree_leaves(result):
            if (
                isinstance(r, ir.StorageBox)
                and isinstance(r.data, ir.Pointwise)
                and id(r) not in passed
                and len(r.get_size()) == 4
                and getattr(r, "preferred_stride", None) is None
            ):
                r.preferred_stride = channels_last_strides(r.get_size())

    def _prefer_eager_strides(self, node, result, inputs):
        """Remember eager's stride order on a new pointwise box: if it is ever stored, it is
        stored that way (a residual add after a permute back to NCHW stays channels-last, and
        the convolution or layer norm that reads it next reads contiguously)."""
        if not (isinstance(result, ir.StorageBox) and isinstance(result.data, ir.Pointwise)):
            return
        if getattr(result, "preferred_stride", None) is not None:
            return
        if any(result is a for a in pytree.tree_leaves(inputs)):
            return  # the op passed an input through: that box belongs to its producer
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() < 2:
            return
        if self.shape_env is not None and not all(
            type(s) is int for s in (*val.shape, *val.stride())
        ):
            return  # symbolic sizes: a symbolic graph's static values (weights) still count
        order = self.memory_orders.get(node)
        if order is not None:  # eager's strides, had its inputs had this graph's layouts
            val = torch.empty_strided(val.shape, order, dtype=val.dtype, device="meta")
        if val.is_contiguous():
            return
        size = result.get_size()
        if [int(s) for s in size] != list(val.shape) or not _dense(val):
            return
        result.preferred_stride = strides_for_order(size, list(val.stride()))

    @staticmethod
    def _tag_origins(result, name):
        for r in pytree.tree_leaves(result):
            box = r.storage_box() if isinstance(r, ir.View) else r
            if isinstance(box, ir.StorageBox) and isinstance(box.data, ir.Loops):
                box.data.origins = getattr(box.data, "origins", set()) | {name}

    def _placeholder(self, node, example):
        val = node.meta.get("val")
        if self.shape_env is not None and isinstance(val, torch.Tensor | torch.SymInt):
            example = val  # symbolic trace: its placeholders carry the symbolic sizes
        if isinstance(example, (torch.SymInt, int)) and not isinstance(example, bool):
            # a size saved across the forward/backward split: an int at run time
            if self.shape_env is None:
                raise NotLowered(f"non-tensor graph input {node.name}: {type(example).__name__}")
            self.graph_input_names.append(node.name)
            e = self.to_expr(example)
            self._bind(e, node.name)
            return int(e) if e.is_Integer else e
        if not isinstance(example, torch.Tensor):
            raise NotLowered(f"non-tensor graph input {node.name}: {type(example).__name__}")
        size, stride = self.to_exprs(example.shape), self.to_exprs(example.stride())
        for d, e in enumerate(size):
            self._bind(e, f"{node.name}.size({d})")
        for d, e in enumerate(stride):
            self._bind(e, f"{node.name}.stride({d})")
        if not isinstance(example.storage_offset(), int):
            raise DynamicShapeUnsupported(f"symbolic storage offset of input {node.name}")
        layout = FixedLayout(example.dtype, size, stride, 0)
        buf = ir.InputBuffer(node.name, layout)
        buf.storage_offset = example.storage_offset()
        self.graph_inputs[node.name] = buf
        self.graph_input_names.append(node.name)
        self.name_to_buffer[node.name] = buf
        return ir.StorageBox(buf)

    def _constant(self, node):
        value = getattr(self.gm, node.target)
        if not isinstance(value, torch.Tensor):
            return value
        name = f"const_{node.target}".replace(".", "_")
        layout = FixedLayout(value.dtype, as_exprs(value.shape), as_exprs(value.stride()), 0)
        buf = ir.ConstantBuffer(name, layout, value)
        buf.storage_offset = value.storage_offset()
        self.constants[name] = value
        self.name_to_buffer[name] = buf
        return ir.StorageBox(buf)

    def _call(self, node, args, kwargs):
        target = node.target
        if target is operator.getitem:
            return args[0][args[1]]
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) or (
            self.shape_env is not None
            and isinstance(val, int)
            and not isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket)
        ):
            # size arithmetic (sym_size, operator.mul, ...): its value is in the trace
            if not isinstance(val, (torch.SymInt, int)):
                raise DynamicShapeUnsupported(f"{node.name}: non-integer symbolic value {val}")
            return self.size_value(val)
        if target in _SIZE_OPS and val is not None:
            return self.size_value(val)
        lowering = LOWERINGS.get(target)
        if node.name in self.force_fallback and isinstance(target, torch._ops.OpOverload):
            lowering = None
        reason = "no lowering for this op"
        if lowering is None and node.name in self.force_fallback:
            reason = "its fused kernel failed to build"
        if lowering is not None:
            try:
                out = lowering(*args, **kwargs)
                from danlu_inductor.lowering.extern import EXTERN_OPS

                (self.externs if target in EXTERN_OPS else self.lowered)[str(target)] += 1
                return out
            except NotLowered as e:
                log.debug("%s: fallback (%s)", target, e)
                reason = f"not lowered for these arguments: {e}"
            except TypeError as e:
                # a symbolic size compared with a number it cannot be decided against
                if self.shape_env is None:
                    raise
                log.debug("%s: fallback for symbolic sizes (%s)", target, e)
                reason = f"not lowered for these symbolic sizes: {e}"
        if not isinstance(target, torch._ops.OpOverload):
            raise NotLowered(f"{node.name}: target {target} is not an ATen op")
        self.fallbacks[str(target)] += 1
        self.fallback_reasons.setdefault(str(target), reason)
        meta = node.meta.get("val")
        meta = meta if _is_tensor_tree(meta) else None
        if self.shape_env is not None and meta is not None:
            # symbolic sizes: make_extern describes the outputs by this node's traced value
            # (on the graph's device), as it does for library calls
            return make_extern(target, args, kwargs, "fallback")
        return make_extern(target, args, kwargs, "fallback", meta_val=_as_meta(meta))

    def _outputs(self, node, env):
        outs = pytree.tree_map(
            lambda a: env[a] if isinstance(a, torch.fx.Node) else a, node.args[0]
        )
        metas = pytree.tree_map(
            lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else None, node.args[0]
        )
        flat, self.out_spec = pytree.tree_flatten(outs)
        flat_meta = pytree.tree_leaves(metas, is_leaf=lambda x: x is None)
        if len(flat_meta) != len(flat):
            flat_meta = [None] * len(flat)
        result = []
        free_from = self.free_outputs_from
        for i, (value, meta) in enumerate(zip(flat, flat_meta)):
            if not is_node(value):
                if isinstance(value, sympy.Basic):
                    self.sym_outputs.append(i)
                result.append(value)
                continue
            if free_from is not None and i >= free_from and self.conv_channels_last:
                # saved for the backward, which is compiled for the layout it gets
                result.append(ir.realize_input(value))
                continue
            stride = None
            if isinstance(meta, torch.Tensor) and _dense(meta):
                stride = self.to_exprs(meta.stride())
            elif value.get_size():
                stride = None
            if isinstance(value, ir.StorageBox) and isinstance(value.data, ir.Loops):
                if stride is not None:
                    stride = strides_for_order(value.get_size(), [hint(s) for s in stride])
                into = self.outputs_into_inputs.get(i)
                target = self.graph_inputs.get(into) if into is not None else None
                if target is not None and list(target.layout.size) == list(value.get_size()):
                    stride = list(target.layout.stride)  # computed in the input's own layout
                out = value.realize(stride)
                if into is not None and isinstance(out, ir.ComputedBuffer):
                    self.into_inputs.setdefault(out.get_name(), into)
                result.append(out)
            else:
                out = ir.realize_input(value, stride)
                if stride is not None and _other_strides(out, stride) and not _row_padded(out):
                    # a view whose strides differ from eager's: the caller gets eager's
                    # layout, except a padded matmul's slice, returned with its rows padded
                    # to 16 bytes as torch.compile's are (the copy would cost what the
                    # padding saved)
                    copy = ir.Pointwise(value.get_dtype(), value.get_size(), value.make_loader())
                    out = ir.StorageBox(copy).realize(stride)
                result.append(out)
        self.graph_outputs = result

    @property
    def output_strides(self) -> list:
        """Per output: its strides (ints), None for non-tensors and symbolic strides."""
        return [
            tuple(int(s) for s in r.layout.stride)
            if hasattr(r, "layout")
            and all(getattr(s, "is_Integer", False) for s in r.layout.stride)
            else None
            for r in self.graph_outputs
        ]

    @property
    def output_layouts(self) -> list:
        """Per output: (sizes, strides) as ints, None for non-tensors and symbolic layouts."""
        out = []
        for r in self.graph_outputs:
            lay = getattr(r, "layout", None)
            dims = (*lay.size, *lay.stride) if lay is not None else ()
            static = lay is not None and all(getattr(s, "is_Integer", False) for s in dims)
            out.append(
                (tuple(int(s) for s in lay.size), tuple(int(s) for s in lay.stride))
                if static
                else None
            )
        return out


def _row_padded(buf) -> bool:
    """A padded 16-bit matmul's slice: static rows of a length 16 bytes do not divide, laid out
    with the padded row stride (``padded_row_strides``)."""
    layout = getattr(buf, "layout", None)
    if layout is None or layout.dtype not in (torch.bfloat16, torch.float16):
        return False
    if layout.offset != 0 or len(layout.size) < 2:
        return False
    if not all(getattr(s, "is_Integer", False) for s in (*layout.size, *layout.stride)):
        return False
    return int(layout.size[-1]) % ALIGN != 0 and layout.has_strides(padded_row_strides(layout.size))


def _other_strides(buf, stride) -> bool:
    layout = getattr(buf, "layout", None)
    return layout is not None and not layout.has_strides(stride)


_SIZE_OPS = (
    torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_stride.int,
    torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_storage_offset.default,
)


def _is_tensor_tree(v):
    leaves = pytree.tree_leaves(v)
    return v is not None and all(
        isinstance(x, (torch.Tensor, int, float, bool)) or x is None for x in leaves
    )


def _as_meta(val):
    if val is None:
        return None

    def conv(t):
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        return t

    try:
        return pytree.tree_map(conv, val)
    except Exception:  # symbolic sizes etc.: let make_extern run the meta kernel instead
        return None


def _dense(t: torch.Tensor) -> bool:
    """Strides that a permutation of contiguous strides gives (no gaps, no overlap)."""
    if any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride())):
        return _dense_symbolic(t)
    if t.numel() <= 1:
        return False
    dims = sorted(range(t.dim()), key=lambda d: t.stride(d))
    expected = 1
    for d in dims:
        if t.shape[d] == 1:
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def _dense_symbolic(t: torch.Tensor) -> bool:
    """``_dense`` on the expressions (no guard recorded): dims ordered by stride hints, each
    stride must equal the product of the inner sizes for every size."""
    g = ir.current_graph()
    size, stride = g.to_exprs(t.shape), g.to_exprs(t.stride())
    if all(s.is_Integer for s in size) and hint(sympy.Mul(*size)) <= 1:
        return False
    dims = sorted(range(len(size)), key=lambda d: hint(stride[d]))
    expected = sympy.Integer(1)
    for d in dims:
        if size[d] == 1:
            continue
        if sympy.expand(stride[d] - expected) != 0:
            return False
        expected = expected * size[d]
    return True
