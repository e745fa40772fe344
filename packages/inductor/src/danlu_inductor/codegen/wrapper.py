"""Wrapper code: the Python module that runs a compiled graph.

It checks input layouts, allocates buffers (reusing freed ones of the same layout, and
writing in place into inputs that die in the kernel that reads them), calls kernels and
library ops in scheduled order, frees buffers after their last use, and returns outputs.
Each kernel call carries a comment naming the FX nodes it came from.
"""

from __future__ import annotations

import math
import re

import sympy
import torch

from danlu_inductor.codegen import workspace
from danlu_inductor.codegen.pyexpr import pexpr, ptuple
from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.layout import contiguous_strides
from danlu_inductor.ir.symbols import (
    DynamicShapeUnsupported,
    is_static,
    product,
    same,
    same_sizes,
)

SCRATCH_MAX_ELEMENTS = 16384
# grouped kernels (codegen/triton/grouped.py): at most this many members, and this many bytes
# of results allocated ahead of their own places
GROUPED_MAX_KERNELS = 128
GROUPED_MAX_BYTES = 32 << 20


# Library matmuls and their out= variants. Their outputs are always row-major (no layout
# check after them). In C++ graphs they write into a buffer the wrapper gives them: a dead
# buffer of the same layout is reused, memory already mapped and warm, instead of a fresh
# allocation per call, whose first touch page-faults inside the matmul.
_MATMUL_OUT_VARIANTS = {
    torch.ops.aten.mm.default: torch.ops.aten.mm.out,
    torch.ops.aten.bmm.default: torch.ops.aten.bmm.out,
    torch.ops.aten.addmm.default: torch.ops.aten.addmm.out,
    torch.ops.aten.baddbmm.default: torch.ops.aten.baddbmm.out,
}


# library kernels whose result is a new tensor, never a view of an argument: a buffer they
# read stays inside the call (codegen/workspace.py)
_FRESH_RESULT_OPS = frozenset({torch.ops.aten.convolution.default, *_MATMUL_OUT_VARIANTS})


def _ints(exprs):
    """Sizes or strides as Python source (expressions of the bound symbols when symbolic)."""
    return ptuple(exprs)


# overload names that FX node names carry (``sum_dim_int_list_3``): noise in a kernel name
_OVERLOAD = re.compile(r"(_(default|tensor|scalar|self|dim_int_list|dim|int|correction|input))+$")


def _names(name: str):
    """A test of a graph output: is it buffer ``name``, or a view of it?"""

    def test(o) -> bool:
        if isinstance(o, ir.ReinterpretView):
            return o.buffer.get_name() == name
        return isinstance(o, ir.Buffer) and o.get_name() == name

    return test


def describe_kernel(has_reduction: bool, origins) -> str:
    """``danlu_red_native_layer_norm_permute``: the kind of loop and the first few ATen ops
    (FX node names without their counters) a kernel was fused from."""
    ops: list[str] = []
    for o in origins:
        op = _OVERLOAD.sub("", re.sub(r"_\d+$", "", re.sub(r"\W", "_", o)))
        if op and op not in ops:
            ops.append(op)
    text = "_".join(ops[:4])[:48].rstrip("_") or "fused"
    return f"danlu_{'red' if has_reduction else 'poi'}_{text}"


class WrapperCodegen:
    """``kernel_backend.call_convention`` decides how kernels are called: ``"pointers"``
    (ctypes functions of the C++ backend get ``data_ptr()`` integers, buffers live on the
    CPU) or ``"tensors"`` (Triton launchers get the tensors; buffers are allocated on the
    ``device`` argument of ``make_call``). With ``defer_index_checks`` the gather bounds
    flag is not read (``.item()`` syncs) after each kernel: ``call.err_flag`` is left for
    the caller to check after the whole call (CUDA graph replays)."""

    def __init__(
        self,
        graph,
        scheduler,
        kernel_backend,
        kernel_prefix="",
        defer_index_checks=False,
        descriptive_names=False,
        group_input_kernels=False,
    ):
        self.kernel_prefix = kernel_prefix
        # GPU kernels are named after what they compute (``danlu_red_native_layer_norm_12``)
        # so that a profiler's kernel list can be read without the wrapper source
        self.descriptive_names = descriptive_names
        self.graph = graph
        self.sched = scheduler
        self.backend = kernel_backend  # makes kernels for fusion groups
        self.pass_tensors = getattr(kernel_backend, "call_convention", "pointers") == "tensors"
        self.defer_index_checks = defer_index_checks
        # pointwise kernels of graph inputs alone launched as one grouped kernel (Triton)
        self.group_input_kernels = group_input_kernels and self.pass_tensors
        self.uses_err = False
        self.kernel_origins: dict[str, list[str]] = {}
        self.artifacts: dict[str, object] = {}
        self.lines: list[str] = []
        self.consts: dict[str, object] = {}
        self.kernel_sources: list[str] = []
        self.kernel_names: list[str] = []
        self.kernel_nargs: dict[str, int] = {}
        self.kernel_nsizes: dict[str, int] = {}  # int64 size arguments after the pointers
        self.memory_log: list[str] = []
        # positions of the graph inputs some output was computed into (in place)
        self.written_inputs: list[int] = []
        # C++ graphs keep their intermediate buffers between calls (codegen/workspace.py)
        self.workspace = (
            workspace.Workspace() if not self.pass_tensors and workspace.enabled() else None
        )
        self.kept_buffers: list[str] = []

    # ------------------------------------------------------------------ helpers
    def _kernel_name(self, grp, origins) -> str:
        n = len(self.kernel_names)
        if not self.descriptive_names:
            return f"{self.kernel_prefix}kernel{n}"
        return f"{self.kernel_prefix}{describe_kernel(grp.has_reduction, origins)}_{n}"

    def _const(self, value) -> str:
        name = f"c{len(self.consts)}"
        self.consts[name] = value
        return name

    def _sym(self, e) -> str:
        """A symbolic size as Python source; its symbols must be bound from the inputs."""
        missing = [s for s in e.free_symbols if s not in self.graph.size_sources]
        if missing:
            raise DynamicShapeUnsupported(
                f"size symbols {sorted(map(str, missing))} cannot be read from the graph inputs"
            )
        return pexpr(e)

    def _arg(self, a, operand=False) -> str:
        """``a`` as Python source. ``operand``: an argument of a library call that writes
        none of its arguments, so a view of a buffer may be ``view``'s (runtime.py: no
        autograd history, its own version counter; a fraction of ``torch.as_strided``'s host
        time). Outputs and written arguments keep ``torch.as_strided``."""
        if isinstance(a, ir.ReinterpretView):
            lay = a.layout
            for e in (*lay.size, *lay.stride, lay.offset):
                self._sym(e)
            name = a.buffer.get_name()
            if self._whole_buffer(a):
                return name
            offset = pexpr(lay.offset)
            if operand:  # the layout's offset counts from the tensor's first element
                return f"view({name}, {_ints(lay.size)}, {_ints(lay.stride)}, {offset})"
            if not isinstance(a.buffer, ir.ComputedBuffer):
                # as_strided counts from the storage's start; an input, a constant or a library
                # kernel's result may be a view that starts further in (the layout's offset
                # counts from its data pointer). Buffers allocated here start at 0.
                offset = f"{name}.storage_offset() + {offset}"
            return f"torch.as_strided({name}, {_ints(lay.size)}, {_ints(lay.stride)}, {offset})"
        if isinstance(a, sympy.Basic):
            return self._sym(a) if not a.is_Integer else repr(int(a))
        if isinstance(a, ir.Buffer):
            return a.get_name()
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self._arg(x, operand) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        if a is None or isinstance(a, (bool, str)):
            return repr(a)
        if isinstance(a, int):
            return repr(a)
        if isinstance(a, float) and math.isfinite(a):
            return repr(a)
        if isinstance(a, torch.dtype):
            return str(a)
        return self._const(a)

    def _whole_buffer(self, view) -> bool:
        """Is ``view`` its buffer as the wrapper holds it: a graph input (after its layout
        check, or under its caller's promise) or a buffer allocated here, with the same
        sizes and strides from its first element? Then the buffer itself is passed: an
        ``as_strided`` call per library argument costs a dispatcher round trip (BERT's
        training step made 175 a step, most of them of a weight as it is)."""
        buf, lay = view.buffer, view.layout
        name = buf.get_name()
        if name in self.graph.graph_inputs:
            base = self.graph.graph_inputs[name].layout
        elif isinstance(buf, ir.ComputedBuffer):
            base = buf.layout
        else:  # constants and library results: their tensors' strides are not planned here
            return False
        return (
            base is not None
            and lay.dtype == base.dtype
            and same(lay.offset, 0)
            and same_sizes(lay.size, base.size)
            and same_sizes(lay.stride, base.stride)
        )

    # ------------------------------------------------------------------ planning
    def _plan(self):
        g_out = set()
        for o in self.graph.graph_outputs:
            if isinstance(o, ir.ReinterpretView):
                g_out.add(o.buffer.get_name())
            elif isinstance(o, ir.Buffer):
                g_out.add(o.get_name())
        self.output_names = g_out
        last_use: dict[str, int] = {}
        for i, grp in enumerate(self.sched.groups):
            for n in grp.nodes:
                last_use[n.name] = max(last_use.get(n.name, -1), i)
                for r in n.read_names:
                    last_use[r] = max(last_use.get(r, -1), i)
        self.last_use = last_use
        # what library calls read (a written input's new value is never stored into those)
        self.extern_reads = {
            r for g in self.sched.groups if g.is_extern for m in g.nodes for r in m.read_names
        }

    def _local_buffers(self, grp) -> set[str]:
        """Buffers computed and consumed entirely inside one kernel: never stored."""
        phase_of = {}
        for p, (_, members) in enumerate(grp.phases):
            for n in members:
                phase_of[n.name] = p
        out = set()
        for n in grp.nodes:
            if n.name in self.output_names or not n.users:
                continue
            if not n.users <= grp.names:
                continue
            if grp.placements[n.name] == "xr" and any(
                phase_of[u] != phase_of[n.name] for u in n.users
            ):
                # read in a later loop of the same outer iteration: a per-thread scratch row
                rn = product(grp.rsizes)
                if not is_static(rn) or int(rn) > SCRATCH_MAX_ELEMENTS:
                    continue
            out.add(n.name)
        return out

    # ------------------------------------------------------------------ generation
    def generate(self) -> str:
        self._plan()
        graph = self.graph
        body: list[str] = []
        pool: dict[tuple, list[str]] = {}
        alias_of: dict[str, str] = {}
        freed: set[str] = set()
        inputs = graph.graph_input_names
        body.append(
            f"{', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args" if inputs else ""
        )
        body.append("args.clear()")
        clash = {s.name for s in graph.size_sources} & (set(graph.name_to_buffer) | set(inputs))
        if clash:  # the wrapper binds each symbol to a local variable of its name
            raise DynamicShapeUnsupported(f"size symbols named like graph values: {clash}")
        derived = graph.derived_sizes
        for symbol, source in sorted(graph.size_sources.items(), key=lambda kv: kv[0].name):
            if symbol not in derived:
                body.append(f"{symbol.name} = {source}")
        for symbol, expr in derived.items():  # after the symbols they are computed from
            body.append(f"{symbol.name} = {self._sym(expr)}  # floor division, in Python")
        for name in inputs:
            if name not in graph.graph_inputs:
                continue  # a size (int) input: read by the bindings above
            lay = graph.graph_inputs[name].layout
            if name in graph.fixed_layout_inputs and all(map(is_static, (*lay.size, *lay.stride))):
                continue
            body.append(f"{name} = ensure_layout({name}, {_ints(lay.size)}, {_ints(lay.stride)})")
        for cname in graph.constants:
            self.consts[cname] = graph.constants[cname]
        future_keys = []
        for grp in self.sched.groups:
            keys = []
            if not grp.is_extern:
                for n in grp.nodes:
                    keys.append(self._key(n.node))
            elif self._writes_into_buffer(grp.nodes[0].node):
                keys.append(self._key(grp.nodes[0].node))
            future_keys.append(keys)

        done: set[int] = set()  # groups already launched inside a grouped kernel
        # the groups a grouped kernel may take (decided once: each batch looks ahead)
        self.input_only = (
            {i for i, g in enumerate(self.sched.groups) if self._reads_only_inputs(g)}
            if self.group_input_kernels
            else set()
        )
        self.runs = self._standalone_runs() if self.group_input_kernels else {}
        for i, grp in enumerate(self.sched.groups):
            if i in done:
                pass
            elif grp.is_extern:
                node = grp.nodes[0].node
                if self._writes_into_buffer(node):
                    self._allocate_buffer(node, pool, body)
                if isinstance(node, ir.ExternKernel) and node.op not in _FRESH_RESULT_OPS:
                    if self.workspace is not None:  # its result may be a view of what it reads
                        self.workspace.escapes(node.input_buffers())
                self._extern_call(node, body)
            else:
                batch = self._input_batch(i, done) if i in self.input_only else [i]
                if len(batch) == 1 and i in self.runs:
                    batch = self.runs[i]
                if len(batch) > 1:
                    self._emit_grouped(batch, i, pool, freed, body, future_keys)
                    done.update(batch[1:])
                    for j in batch[1:]:  # allocated here: no later group needs their layouts
                        future_keys[j] = []
                else:
                    self._emit_kernel(grp, i, pool, freed, body, future_keys)
            # frees
            for name, last in self.last_use.items():
                if last != i or name in freed or name in self.output_names:
                    continue
                if name in graph.graph_inputs or name in graph.constants:
                    continue
                node = self.sched.name_to_node.get(name)
                if node is None:
                    continue
                if not grp.is_extern and name in self._local_buffers(grp):
                    continue
                freed.add(name)
                poolable = isinstance(node.node, ir.ComputedBuffer) or self._writes_into_buffer(
                    node.node
                )
                if poolable and self._future_key(node.node, i, future_keys):
                    pool.setdefault(self._key(node.node), []).append(name)
                else:
                    body.append(f"del {name}")
        outs = [
            self._arg(o) if not isinstance(o, (int, float, bool)) and o is not None else repr(o)
            for o in graph.graph_outputs
        ]  # symbolic sizes among them evaluate to Python ints
        body.append(f"return [{', '.join(outs)}]")
        del alias_of
        if self.workspace is not None:
            self.workspace.escapes(self.output_names)
            body, self.kept_buffers = self.workspace.apply(body)
        return self._module(body)

    def _emit_kernel(self, grp, i, pool, freed, body, future_keys):
        """Make the group's kernel, allocate its stored buffers and launch it."""
        local = self._local_buffers(grp)
        origins = self._origins(grp)
        kernel_name = self._kernel_name(grp, origins)
        kernel = self.backend.make_kernel(grp, kernel_name, self._dtypes(), local)
        self._register_kernel(kernel, origins)
        body.append(f"# {kernel.name}: {grp.describe()}")
        body.append(f"#   from FX nodes: {', '.join(origins)}")
        for n in grp.nodes:
            if n.name not in local:
                self._allocate(n, grp, i, pool, freed, body, future_keys)
        self._launch(kernel, body)

    def _origins(self, grp) -> list:
        origins = []
        for n in grp.nodes:
            for o in n.node.origins:
                if o not in origins:
                    origins.append(o)
        return origins

    def _register_kernel(self, kernel, origins):
        self.kernel_origins[kernel.name] = origins
        self.artifacts[kernel.name] = kernel
        self.kernel_names.append(kernel.name)
        self.kernel_sources.append(kernel.source)
        self.kernel_nargs[kernel.name] = len(kernel.params) + int(kernel.uses_err)

    def _launch(self, kernel, body):
        kernel_name = kernel.name
        suffix = "" if self.pass_tensors else ".data_ptr()"
        ptrs = [f"{p}{suffix}" for p in kernel.params]
        if kernel.uses_err:
            self.uses_err = True
            if not self.defer_index_checks:
                body.append("_err.zero_()")
            ptrs.append(f"_err{suffix}")
        size_args = list(getattr(kernel, "size_args", ()))
        bound = {s.name for s in self.graph.size_sources}
        for a in size_args:
            if a not in bound:
                raise DynamicShapeUnsupported(f"{kernel_name}: size {a} is not bound")
        ptrs += size_args
        self.kernel_nsizes[kernel_name] = len(size_args)
        body.append(f"{kernel_name}({', '.join(ptrs)})")
        if kernel.uses_err and not self.defer_index_checks:
            body.append(f"if _err.item(): raise_index_error('{kernel_name}')")

    # ------------------------------------------------------------------ grouped kernels
    def _reads_only_inputs(self, grp) -> bool:
        """A standalone group computed from graph inputs and constants alone (a weight's or
        bias's cast): it may run anywhere before its readers."""
        if not self._standalone(grp):
            return False
        n = grp.nodes[0]
        if not n.read_names or any(
            r not in self.graph.graph_inputs and r not in self.graph.constants for r in n.read_names
        ):
            return False
        return not n.deps  # it reads an input after a call that writes into it: it stays after

    def _standalone(self, grp) -> bool:
        """A single-node pointwise group of static size with nothing kept in registers."""
        if grp.is_extern or grp.has_reduction or len(grp.nodes) != 1:
            return False
        n = grp.nodes[0]
        if n.name not in self.output_names and not n.users:
            return False
        return all(is_static(s) for s in n.ranges) and not self._local_buffers(grp)

    def _standalone_runs(self) -> dict[int, list[int]]:
        """Runs of consecutive standalone groups none of which reads another's result (a
        backward's weight-gradient casts, one after each other at its end): each run is
        launched as one grouped kernel at its first place, up to GROUPED_MAX_BYTES of results.
        First index -> the run's groups."""
        runs: dict[int, list[int]] = {}
        run: list[int] = []
        made: set[str] = set()
        nbytes = 0

        def close():
            if len(run) > 1:
                runs[run[0]] = list(run)

        for j, grp in enumerate(self.sched.groups):
            ok = j not in self.input_only and self._standalone(grp)
            size = self._stored_bytes(grp) if ok else 0
            n = grp.nodes[0]
            # what it reads and waits for comes before the run (moved earlier, it must not
            # need another member)
            if (
                ok
                and run
                and not ((n.read_names | n.deps) & made)
                and (nbytes + size <= GROUPED_MAX_BYTES and len(run) < GROUPED_MAX_KERNELS)
            ):
                run.append(j)
                made.add(n.name)
                nbytes += size
                continue
            close()
            run, made, nbytes = ([j], {n.name}, size) if ok else ([], set(), 0)
        close()
        return runs

    def _input_batch(self, i, done) -> list[int]:
        """Group ``i`` and the later groups like it (``self.input_only``), up to
        GROUPED_MAX_BYTES of results: launched together at ``i``. Their results are allocated
        here, earlier than their own places, so the bytes are bounded."""
        batch, nbytes = [], 0
        for j in sorted(self.input_only - done):
            if j < i:
                continue
            size = self._stored_bytes(self.sched.groups[j])
            if batch and (nbytes + size > GROUPED_MAX_BYTES or len(batch) >= GROUPED_MAX_KERNELS):
                break
            batch.append(j)
            nbytes += size
        return batch

    def _stored_bytes(self, grp) -> int:
        buf = grp.nodes[0].node
        return int(product(buf.get_size())) * buf.get_dtype().itemsize

    def _emit_grouped(self, batch, i, pool, freed, body, future_keys):
        """Launch the groups of ``batch`` at ``i``: one grouped kernel for those whose kernels
        fit it (grouped.py), the others one by one."""
        from danlu_inductor.codegen.triton.grouped import compose, fits

        groups = [self.sched.groups[j] for j in batch]
        base = f"{self.kernel_prefix}danlu_grouped_{len(self.kernel_names)}"
        kernels = [
            self.backend.make_kernel(g, f"{base}_m{k}", self._dtypes(), set())
            for k, g in enumerate(groups)
        ]
        members = [k for k, art in enumerate(kernels) if fits(art)]
        combo = compose(base, [kernels[k] for k in members]) if len(members) > 1 else None
        if combo is None:
            members = []
        for k, g in enumerate(groups):
            if k not in members:
                self._emit_kernel(g, i, pool, freed, body, future_keys)
        if combo is None:
            return
        origins = [o for k in members for o in self._origins(groups[k])]
        self._register_kernel(combo, origins)
        body.append(f"# {combo.name}: {len(members)} independent pointwise kernels, grouped")
        for k in members:
            body.append(f"#   {groups[k].describe()}")
            for n in groups[k].nodes:
                self._allocate(n, groups[k], i, pool, freed, body, future_keys)
        self._launch(combo, body)

    def _dtypes(self):
        out = {}
        for name, buf in self.graph.name_to_buffer.items():
            if buf.layout is not None:
                out[name] = buf.layout.dtype
        return out

    @staticmethod
    def _key(buf):
        lay = buf.layout
        return (lay.dtype, tuple(lay.size), tuple(lay.stride))

    def _future_key(self, buf, i, future_keys):
        key = self._key(buf)
        return any(key in ks for ks in future_keys[i + 1 :])

    def _allocate(self, n, grp, i, pool, freed, body, future_keys):
        buf = n.node
        key = self._key(buf)
        target = self.graph.into_inputs.get(buf.name)
        if target is not None and self._writes_into_input(n, grp, i, target):
            body.append(f"{buf.name} = {target}  # the new value of input {target}, in place")
            self.memory_log.append(f"{buf.name} written in place into input {target}")
            self.written_inputs.append(self.graph.graph_input_names.index(target))
            return
        # in place: an input of this kernel that dies here, read only where we write
        for cand in sorted(n.read_names):
            cnode = self.sched.name_to_node.get(cand)
            if (
                cnode is None
                or cand in freed
                or cand in self.output_names
                or not isinstance(cnode.node, ir.ComputedBuffer)
                or cand in grp.names
                or self.last_use.get(cand) != i
                or self._key(cnode.node) != key
            ):
                continue
            # a reduction kernel runs several passes over R: another member may read the
            # input again in a later pass, after this one overwrote it
            if self._read_only_where_written(grp, n, cand, others_may_read=not grp.has_reduction):
                body.append(f"{buf.name} = {cand}  # in place: {cand} dies here")
                if self.workspace is not None:
                    self.workspace.hand_on(buf.name, cand)
                self.memory_log.append(f"{buf.name} written in place into {cand}")
                freed.add(cand)
                return
        self._allocate_buffer(buf, pool, body)

    @staticmethod
    def _read_only_where_written(grp, n, name: str, others_may_read: bool) -> bool:
        """In ``grp``'s kernel, is ``name`` read (directly, not gathered) only at the element
        that member ``n`` writes, and by no other member unless ``others_may_read``? Then
        ``n`` may store into ``name``'s memory."""
        write = grp.write_in_kernel(n)
        readers = [
            (m, idx, ind)
            for m in grp.nodes
            for nm, idx, ind in grp.reads_in_kernel(m)
            if nm == name
        ]
        if not others_may_read and any(m is not n for m, _, _ in readers):
            return False
        return all(not ind and sympy.expand(idx - write) == 0 for _, idx, ind in readers)

    def _writes_into_input(self, n, grp, i, target) -> bool:
        """Whether output ``n`` (the new value of graph input ``target``) may be stored into
        the input itself: the caller's tensor as it is (its layout promised, so no checked
        copy stands in for it) with ``n``'s layout; no later kernel, no library call and no
        output reads the old value; in this kernel only ``n``'s own element is read before it
        is written (as for intermediates written in place, below)."""
        graph = self.graph
        inp = graph.graph_inputs.get(target)
        if (
            inp is None
            or target not in graph.fixed_layout_inputs
            or not all(map(is_static, (*inp.layout.size, *inp.layout.stride)))
            or self._key(inp) != self._key(n.node)
            or target in self.output_names
            or self.last_use.get(target, -1) > i
            or sum(map(_names(n.name), graph.graph_outputs)) != 1
        ):
            return False
        if target in self.extern_reads:
            return False  # a library call may hand on a view of it
        return self._read_only_where_written(grp, n, target, others_may_read=False)

    def _allocate_buffer(self, buf, pool, body):
        """A dead buffer of the same layout (reused), else a new one."""
        key = self._key(buf)
        if pool.get(key):
            old = pool[key].pop()
            body.append(f"{buf.name} = {old}; del {old}  # reuse")
            if self.workspace is not None:
                self.workspace.hand_on(buf.name, old)
            self.memory_log.append(f"{buf.name} reuses {old}")
            return
        lay = buf.layout
        for e in (*lay.size, *lay.stride):
            self._sym(e)
        body.append(
            f"{buf.name} = empty({_ints(lay.size)}, {_ints(lay.stride)}, {lay.dtype}, device)"
        )
        if self.workspace is not None and all(map(is_static, (*lay.size, *lay.stride))):
            self.workspace.allocate(buf.name, len(body) - 1)

    def _extern_call(self, node, body):
        org = f"  # from {', '.join(node.origins)}" if node.origins else ""
        if isinstance(node, ir.MultiOutput):
            sel = "".join(f"[{k}]" for k in node.path)
            body.append(f"{node.name} = {node.parent.name}{sel}")
            self._check_extern_layout(node, body)
            return
        operand = not getattr(node, "mutates", ())
        args = ", ".join(self._arg(a, operand) for a in node.args)
        kwargs = ", ".join(f"{k}={self._arg(v, operand)}" for k, v in node.kwargs.items())
        call = ", ".join(x for x in (args, kwargs) if x)
        if self._writes_into_buffer(node):  # allocated by the caller
            op = self._const(_MATMUL_OUT_VARIANTS[node.op])
            body.append(f"{op}({call}, out={node.name})  # {node.kind}: {node.op}{org}")
            return
        op = self._const(node.op)
        body.append(f"{node.name} = {op}({call})  # {node.kind}: {node.op}{org}")
        self._check_extern_layout(node, body)

    def _writes_into_buffer(self, node) -> bool:
        """A library matmul of a C++ graph with a contiguous planned output: called with
        ``out=`` a buffer the wrapper allocates or reuses."""
        if self.pass_tensors or not isinstance(node, ir.ExternKernel):
            return False
        if node.op not in _MATMUL_OUT_VARIANTS or node.layout is None or "out" in node.kwargs:
            return False
        lay = node.layout
        return lay.offset == 0 and tuple(lay.stride) == tuple(contiguous_strides(lay.size))

    def _check_extern_layout(self, node, body):
        """Library kernels choose their outputs' strides at run time, and the meta function
        that planned them can disagree (cuDNN attention's output on CUDA does): the kernels
        after it index the buffer with the planned strides, so a different layout is copied
        into the planned one."""
        lay = node.layout
        op = node.parent.op if isinstance(node, ir.MultiOutput) else node.op
        if lay is None or op in _MATMUL_OUT_VARIANTS:
            return
        for e in (*lay.size, *lay.stride):
            self._sym(e)
        body.append(
            f"{node.name} = extern_layout({node.name}, {_ints(lay.size)}, {_ints(lay.stride)})"
        )

    def _module(self, body) -> str:
        where = (
            "Triton launchers, called with tensors"
            if self.pass_tensors
            else "the compiled library, called with data pointers"
        )
        head = [
            f"# danlu_inductor wrapper: run `call(args)`; kernels are {where}",
            "import threading",
            "",
            "import torch",
            "from danlu_inductor.runtime import (",
            "    direct_op, empty, ensure_layout, extern_layout, raise_index_error, view,",
            ")",
            "",
            "",
            "def make_call(kernels, consts, device='cpu'):",
            "    device = torch.device(device)",
        ]
        for k in self.kernel_names:
            head.append(f"    {k} = kernels['{k}']")
        for c, value in self.consts.items():
            if isinstance(value, torch._ops.OpOverload):
                head.append(f"    {c} = direct_op(consts['{c}'])")
            else:
                head.append(f"    {c} = consts['{c}']")
        head.append("    _err = torch.zeros((), dtype=torch.int64, device=device)")
        head.append("")
        lines = ["        " + ln for ln in body if ln != ""]
        if self.kept_buffers:
            head += workspace.call_with_workspace(lines)
        else:
            head.append("    def call(args):")
            # deferred: the bounds flag is sticky (never zeroed here); the caller reads it
            head += lines
        head.append("")
        head.append("    call.err_flag = _err")
        head.append("    return call")
        return "\n".join(head) + "\n"
