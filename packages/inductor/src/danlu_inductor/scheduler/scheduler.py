"""The scheduler: dependencies, dead-node elimination, fusion, kernel order.

Fusion is greedy by score, like Inductor's: candidate pairs of groups that share a buffer
(producer -> consumer: vertical) or read the same buffer (siblings: horizontal) are sorted by
the bytes they would save and merged when ``can_fuse`` allows it. A merged group is one
kernel over an outer index space X and (for reductions) a reduction space R. Each member is
placed "x" (once per outer index), "xr" (inside a reduction-space loop) or "reduction".
"""

from __future__ import annotations

import sympy
import torch

from danlu_inductor.codegen.loop_order import reads_along_x
from danlu_inductor.codegen.triton.heuristics import PERSISTENT_MAX_RNUMEL
from danlu_inductor.ir import nodes as ir
from danlu_inductor.ir.symbols import (
    DynamicShapeUnsupported,
    affine_on_loop,
    hint,
    index_vars,
    is_static,
    product,
    simplify_index,
    unit_stride,
)
from danlu_inductor.lowering.views import reshape_crosses_dims
from danlu_inductor.options import verify_ir_enabled
from danlu_inductor.scheduler.nodes import (
    ExternSchedulerNode,
    MultiOutputSchedulerNode,
    SchedulerNode,
)

MAX_FUSION_SIZE = 64
# A GPU kernel's tensor streams (buffers of more than one element it loads or stores). The
# backward of a residual stack recomputes every layer's residual and normalized input from
# saved matmul results; fused whole, that is one kernel of 160+ pointers whose build alone
# (3-5 s a config on one core, tens of seconds beside other builds) is a training compile's
# critical path. Split at this many streams, each piece builds in about a second and the
# chain costs one more store and load of the residual where it is cut.
MAX_GPU_KERNEL_STREAMS = 48
# ... and 8 more for a merge of two reductions: a reduction left out of its row kernel is
# another pass over its input and 2-3 launches (a split sum's stages), a pointwise member
# left out runs in the kernel of its consumer at the cost of one read
REDUCTION_STREAM_HEADROOM = 8

_aten = torch.ops.aten
# Library calls that read their inputs and write only their own outputs, draw no random
# numbers and have no other effect: their order among library calls is free (their data
# dependencies still order them). Every other library call keeps its place among those
# that keep theirs. LLaMA training's backward recomputes SwiGLU's product for the down
# projection's weight-gradient matmul in a kernel of its own: ordered after it, the gradient
# kernel that reads the same two tensors could not take it in (0.275 ms a step on the H200).
ORDER_FREE_EXTERNS = frozenset(
    {
        _aten.mm.default,
        _aten.addmm.default,
        _aten.bmm.default,
        _aten.baddbmm.default,
        _aten.convolution.default,
        _aten.convolution_backward.default,
    }
)


def _keeps_call_order(extern) -> bool:
    return getattr(extern, "op", None) not in ORDER_FREE_EXTERNS or bool(extern.mutates)


class FusionGroup:
    """A set of SchedulerNodes that become one kernel."""

    def __init__(self, nodes: list[SchedulerNode], xsizes, rsizes):
        self.nodes = sorted(nodes, key=lambda n: n.order)
        self.names = {n.name for n in self.nodes}
        self.xsizes = list(xsizes)
        self.rsizes = list(rsizes)
        self.placements = {n.name: n.placement(self.xsizes, self.rsizes) for n in self.nodes}
        self.xvars = index_vars("x", len(self.xsizes))
        self.rvars = index_vars("r", len(self.rsizes))
        self.name = self.nodes[0].name
        self.order = self.nodes[0].order
        self.is_extern = False
        self.phases: list[tuple[str, list[SchedulerNode]]] = []

    @staticmethod
    def of(node: SchedulerNode) -> FusionGroup:
        return FusionGroup([node], node.ranges, node.rranges)

    @property
    def has_reduction(self):
        return any(n.is_reduction for n in self.nodes)

    def index_of(self, node):
        return node.index_in_kernel(
            self.placements[node.name], self.xvars, self.rvars, self.xsizes, self.rsizes
        )

    def reads_in_kernel(self, node):
        """The node's reads with indices in kernel variables."""
        idx, ridx = self.index_of(node)
        allv = list(index_vars("x", len(node.ranges))) + list(index_vars("r", len(node.rranges)))
        vals = list(idx) + list(ridx)
        sub = dict(zip(allv, vals))
        return [(d.name, sympy.expand(d.index.xreplace(sub)), d.indirect) for d in node.reads]

    def write_in_kernel(self, node):
        idx, _ = self.index_of(node)
        return sympy.expand(node.write_index(idx))

    def compute_phases(self):
        """Split members into loops: consecutive "xr"/"reduction" members share one loop over
        R unless one reads a reduction finished in that same loop; "x" members run between."""
        phases: list[tuple[str, list]] = []
        written_by_reduction_in_phase: set[str] = set()
        for n in self._phase_order():
            kind = "x" if self.placements[n.name] == "x" else "r"
            reads = n.read_names
            if (
                phases
                and phases[-1][0] == kind
                and not (kind == "r" and reads & written_by_reduction_in_phase)
            ):
                phases[-1][1].append(n)
            else:
                phases.append((kind, [n]))
                written_by_reduction_in_phase = set()
            if n.is_reduction:
                written_by_reduction_in_phase.add(n.name)
        self.phases = phases
        return phases

    def _phase_order(self):
        """Members in a dependency order that puts each one in the earliest loop it can join:
        depth = reductions finished before it can run (on its longest in-group input path);
        sorted by (depth, "x" before "xr"/"reduction", original order). So independent
        reductions of one row share a loop (layer norm's mean and variance inputs, read once)."""
        by_name = {n.name: n for n in self.nodes}
        depth: dict[str, int] = {}
        for n in self.nodes:  # self.nodes is a topological order
            d = 0
            for r in n.read_names & self.names:
                if r in depth:
                    d = max(d, depth[r] + (1 if by_name[r].is_reduction else 0))
            depth[n.name] = d
        return sorted(
            self.nodes,
            key=lambda n: (depth[n.name], self.placements[n.name] != "x", n.order),
        )

    def describe(self) -> str:
        kind = "reduction" if self.has_reduction else "pointwise"
        xs = "x".join(str(s) for s in self.xsizes) or "1"
        rs = "x".join(str(s) for s in self.rsizes)
        dims = xs + (f" | r {rs}" if rs else "")
        members = ", ".join(f"{n.name}:{self.placements[n.name]}" for n in self.nodes)
        return f"{kind} kernel [{dims}]: {members}"


def _unit_dims(index, loop) -> set:
    """The loop variables one step of which moves ``index`` by one element."""
    return {v for v, _ in loop if index.has(v) and unit_stride(index, v, loop)}


def _unsplit(index):
    """``index`` with the div/mod pairs of a reshape folded back (a [4, 64, 1024] view of a
    [256, 1024] buffer read as ``1024*(64*(x // 64) + x % 64) + r`` is ``1024*x + r``)."""
    return sympy.expand(simplify_index(index))


def _score_nearby_pairs(scores: dict, nodes: list, weight: int) -> None:
    """Add ``weight`` to the score of each pair of ``nodes`` at most 7 apart in the list."""
    for i in range(len(nodes)):
        for j in range(i + 1, min(len(nodes), i + 8)):
            key = (nodes[i].name, nodes[j].name)
            scores[key] = scores.get(key, 0) + weight


# Pointwise kernels of at most this many elements are launch cost only.
TINY_NUMEL = 64


def _tiny_alike(groups) -> dict:
    """Tiny pointwise nodes by shape. They share no buffer, so nothing pairs them, yet one
    kernel can do them all: the batch norms' step counters (ResNet-50's training forward adds
    1 to 53 of them, a launch each)."""
    out: dict[tuple, list] = {}
    for g in groups:
        if g.is_extern or g.has_reduction:
            continue
        for n in g.nodes:
            if all(is_static(s) for s in n.ranges):
                if int(product(n.ranges)) <= TINY_NUMEL:
                    out.setdefault(tuple(int(s) for s in n.ranges), []).append(n)
    return {k: v for k, v in out.items() if len(v) > 1}


class ExternGroup:
    def __init__(self, node):
        self.nodes = [node]
        self.names = {node.name}
        self.name = node.name
        self.order = node.order
        self.is_extern = True

    def describe(self):
        return f"extern {self.nodes[0].node.dump()}"


class Scheduler:
    def __init__(self, graph):
        self.graph = graph
        self.fusion_log: list[str] = []
        self._numels: dict[str, int] = {}  # buffer name -> its numel (hinted)
        self.output_names = {
            b.get_name() if isinstance(b, ir.Buffer) else b.buffer.get_name()
            for b in graph.graph_outputs
            if isinstance(b, (ir.Buffer, ir.ReinterpretView))
        }
        self.nodes = self._create_nodes()
        self._compute_deps()
        self._dead_node_elimination()
        self.groups = self._fuse()
        self.groups = self._topological(self.groups)
        for g in self.groups:
            if not g.is_extern:
                g.compute_phases()
        self.verify_report = None  # what ir/verify.py checked, when it ran
        if verify_ir_enabled():
            from danlu_inductor.ir.verify import verify_graph

            self.verify_report = verify_graph(graph, self)

    # ------------------------------------------------------------------ nodes and deps
    def _create_nodes(self):
        out = []
        for i, buf in enumerate(self.graph.buffers):
            if isinstance(buf, ir.ComputedBuffer):
                out.append(SchedulerNode(buf, i))
            elif isinstance(buf, ir.MultiOutput):
                out.append(MultiOutputSchedulerNode(buf, i))
            elif isinstance(buf, ir.ExternKernel):
                out.append(ExternSchedulerNode(buf, i))
        self.name_to_node = {n.name: n for n in out}
        return out

    def _compute_deps(self):
        last_writer: dict[str, str] = {}
        readers: dict[str, list[str]] = {}
        prev_extern = None
        for n in self.nodes:
            for b in n.read_names:
                if b in last_writer:
                    n.deps.add(last_writer[b])
                readers.setdefault(b, []).append(n.name)
            if isinstance(n, ExternSchedulerNode):
                if _keeps_call_order(n.node):
                    # library calls keep their relative order (random streams, side effects)
                    if prev_extern is not None:
                        n.deps.add(prev_extern)
                    prev_extern = n.name
                for b in n.node.mutates:
                    if b in last_writer:
                        n.deps.add(last_writer[b])
                    n.deps.update(r for r in readers.get(b, []) if r != n.name)
                    last_writer[b] = n.name
                    readers[b] = []
            last_writer[n.name] = n.name
        for n in self.nodes:
            for d in n.deps:
                self.name_to_node[d].users.add(n.name)

    def _dead_node_elimination(self):
        alive = []
        removed = set()
        for n in reversed(self.nodes):
            live_users = n.users - removed
            if n.is_extern or live_users or n.name in self.output_names:
                alive.append(n)
            else:
                removed.add(n.name)
                self.fusion_log.append(f"removed dead buffer {n.name}")
        self.nodes = list(reversed(alive))
        for n in self.nodes:
            n.users -= removed
        self.name_to_node = {n.name: n for n in self.nodes}
        # ancestors, for the cycle check
        self.ancestors: dict[str, set[str]] = {}
        for n in self.nodes:
            anc = set()
            for d in n.deps:
                if d in self.name_to_node:
                    anc.add(d)
                    anc |= self.ancestors[d]
            self.ancestors[n.name] = anc

    # --------------------------------------------------------------------------- fusion
    def _fuse(self):
        groups = {}
        for n in self.nodes:
            g = ExternGroup(n) if n.is_extern else FusionGroup.of(n)
            groups[n.name] = g
        self.node_group = {n.name: groups[n.name] for n in self.nodes}
        self._preds_cache: dict[int, tuple] = {}
        for _ in range(10):
            fused_any = False
            for a, b in self._candidate_pairs(self._groups_in_order()):
                ga, gb = self.node_group[a], self.node_group[b]
                if ga is gb:
                    continue
                merged = self.can_fuse(ga, gb)
                if merged is None:
                    continue
                kind = (
                    "vertical" if self._depends(ga, gb) or self._depends(gb, ga) else "horizontal"
                )
                self.fusion_log.append(
                    f"fuse {kind}: [{', '.join(sorted(ga.names))}] + [{', '.join(sorted(gb.names))}]"
                )
                for nm in merged.names:
                    self.node_group[nm] = merged
                self._preds_cache.clear()
                fused_any = True
            if not fused_any:
                break
        return self._groups_in_order()

    def _groups_in_order(self):
        """The current groups, by their first node in the graph: the candidate pairs (and so
        the kernels) must not depend on where the groups happen to live in memory (a set of
        them made the same graph fuse differently from one process to the next)."""
        unique = {id(g): g for g in self.node_group.values()}
        return sorted(unique.values(), key=lambda g: min(n.order for n in g.nodes))

    def _candidate_pairs(self, groups):
        """(node a, node b) pairs from different groups, best score first."""
        readers: dict[str, list] = {}
        for g in groups:
            if g.is_extern:
                continue
            for n in g.nodes:
                for b in n.read_names:
                    readers.setdefault(b, []).append(n)
        scores: dict[tuple[str, str], int] = {}
        # siblings: readers of what one kernel wrote (the second stages of split reductions
        # fused in their first stage) share no buffer but can run as one kernel
        siblings: dict[int, dict[str, object]] = {}
        for b, rs in readers.items():
            size = self._bytes(b)
            producer = self.name_to_node.get(b)
            if producer is not None and not producer.is_extern:
                for r in rs:
                    key = (producer.name, r.name)
                    scores[key] = scores.get(key, 0) + 2 * size
                group = siblings.setdefault(id(self.node_group[producer.name]), {})
                group.update((r.name, r) for r in rs)
            _score_nearby_pairs(scores, rs, size)
        for members in siblings.values():
            _score_nearby_pairs(scores, list(members.values()), 1)
        for members in _tiny_alike(groups).values():
            _score_nearby_pairs(scores, members, 1)
        order = {n.name: n.order for n in self.nodes}
        return [
            k
            for k in sorted(
                scores,
                key=lambda k: (
                    -scores[k],
                    abs(order[k[0]] - order[k[1]]),
                    order[k[0]],
                    order[k[1]],
                ),
            )
            if k[0] != k[1]
        ]

    def _numel(self, name) -> int:
        numels = self._numels  # sizes never change while fusing
        out = numels.get(name)
        if out is None:
            buf = self.graph.name_to_buffer.get(name)
            out = 0 if buf is None or buf.layout is None else hint(product(buf.layout.size))
            numels[name] = out
        return out

    def _bytes(self, name):
        buf = self.graph.name_to_buffer.get(name)
        if buf is None or buf.layout is None:
            return 1
        n = 1
        for s in buf.layout.size:
            n *= hint(s)
        return max(n, 1) * buf.layout.dtype.itemsize

    def _depends(self, ga, gb) -> bool:
        """Does some member of gb depend (transitively) on ga?"""
        return any(self.ancestors[n.name] & ga.names for n in gb.nodes)

    def _cycle(self, ga, gb) -> bool:
        """Would merging ga and gb close a cycle between kernels? It does when a path between
        them runs through a third group. Checked on groups, not nodes: two nodes fused earlier
        can link paths that no single node does."""
        return self._reaches_through_other(ga, gb) or self._reaches_through_other(gb, ga)

    def _group_preds(self, g):
        # the cycle checks between two merges ask for the same groups' predecessors again
        # and again; the cache is emptied whenever node_group changes (_fuse)
        hit = self._preds_cache.get(id(g))
        if hit is not None:
            return hit
        preds = {}
        for n in g.nodes:
            for d in n.deps:
                h = self.node_group.get(d)
                if h is not None and h is not g:
                    preds[id(h)] = h
        out = self._preds_cache[id(g)] = tuple(preds.values())
        return out

    def _reaches_through_other(self, src, dst) -> bool:
        stack = [h for h in self._group_preds(dst) if h is not src]
        seen = {id(h) for h in stack}
        while stack:
            for p in self._group_preds(stack.pop()):
                if p is src:
                    return True
                if p is not dst and id(p) not in seen:
                    seen.add(id(p))
                    stack.append(p)
        return False

    def can_fuse(self, ga, gb):
        """The merged group, or None when fusing would be illegal or pointless."""
        if ga.is_extern or gb.is_extern:
            return None
        if len(ga.nodes) + len(gb.nodes) > MAX_FUSION_SIZE:
            return None
        nodes = ga.nodes + gb.nodes
        if ga.has_reduction or gb.has_reduction:
            # the reductions' space; two reduction groups may fuse in either's (a column
            # sum's first stage goes into a row kernel's, "xsum")
            spaces = [(g.xsizes, g.rsizes) for g in (ga, gb) if g.has_reduction]
        else:
            first = ga if ga.order <= gb.order else gb
            spaces = [(first.xsizes, first.rsizes)]
        for xs, rs in spaces:
            numels = (product(xs), product(rs))
            places = [n.placement(xs, rs, numels) for n in nodes]
            if None not in places:
                break
        else:
            return None
        row_blocks = "xsum" in places
        if row_blocks and not self._row_blocks_fit(xs, rs):
            return None
        if self.graph.for_gpu and self._too_many_streams(ga, gb):
            return None
        if self._cycle(ga, gb):
            return None
        try:
            merged = FusionGroup(nodes, xs, rs)
            if not self._legal(merged) or self._reshape_scatters(merged):
                return None
            if row_blocks and reads_along_x(merged, merged.xsizes):
                return None  # a column-order kernel (outer reduction) holds no whole rows
            if self.graph.for_gpu and not self._xr_members_coalesced(merged):
                return None
        except DynamicShapeUnsupported:  # symbolic dims that do not line up: separate kernels
            return None
        return merged

    def _too_many_streams(self, ga, gb) -> bool:
        """Would the merged kernel load or store more than MAX_GPU_KERNEL_STREAMS buffers of
        more than one element (REDUCTION_STREAM_HEADROOM more when both sides reduce)?
        Stores counted: members used outside the pair or outputs."""
        limit = MAX_GPU_KERNEL_STREAMS
        if ga.has_reduction and gb.has_reduction:
            limit += REDUCTION_STREAM_HEADROOM
        nodes = ga.nodes + gb.nodes
        names = ga.names | gb.names
        reads = set().union(*(n.read_names for n in nodes)) - names
        if len(reads) + len(nodes) <= limit:
            return False  # the common case, decided without sizes
        stored = [
            n.name
            for n in nodes
            if n.name in self.output_names or not n.users <= names or not n.users
        ]
        streams = sum(1 for b in [*reads, *stored] if self._numel(b) != 1)
        return streams > limit

    def _row_blocks_fit(self, xs, rs) -> bool:
        """A kernel that sums blocks of rows down the columns ("xsum") holds whole rows: a
        persistent row kernel on a GPU graph (static sizes, rows of at most 1024)."""
        if not self.graph.for_gpu or not all(isinstance(s, (int, sympy.Integer)) for s in rs):
            return False
        return int(product(rs)) <= PERSISTENT_MAX_RNUMEL

    def _reshape_scatters(self, g: FusionGroup) -> bool:
        """Does a member whose dims regroup the kernel's across dims (a [2, 56, 56, 40] buffer
        in a [2, 40, 56, 56] kernel) walk a whole-size buffer out of memory order? Such a
        member is matched to the kernel by flat index; that costs nothing while both walk
        their memory in logical order (contiguous buffers: only per-channel reads divide),
        but beside a channels-last buffer, or reading a permuted one, it pairs elements that
        are far apart in memory: each loop is faster alone."""
        for n in g.nodes:
            place = g.placements[n.name]
            sizes = g.xsizes if place != "xr" else g.xsizes + g.rsizes
            if place in ("reduction", "xsum") or not reshape_crosses_dims(n.ranges, sizes):
                continue
            own_loop = list(zip(index_vars("x", len(n.ranges)), n.ranges))
            kernel_loop = list(zip([*g.xvars, *g.rvars], [*g.xsizes, *g.rsizes]))
            pairs = [(n.write_index([v for v, _ in own_loop]), g.write_in_kernel(n))]
            numel = hint(n.numel)
            for d, (name, index, _) in zip(n.reads, g.reads_in_kernel(n)):
                if self._numel(name) == numel:
                    pairs.append((d.index, index))
            for own, fused in pairs:
                if affine_on_loop(own, own_loop) and not affine_on_loop(fused, kernel_loop):
                    return True
            if self.graph.for_gpu and self._crossing_store_strided(g, n, kernel_loop):
                return True
        return False

    def _crossing_store_strided(self, g: FusionGroup, member, loop) -> bool:
        """A member matched by flat index whose store has its unit stride along another loop
        dim than the kernel's other stores: however the kernel orders its loop, one of them
        writes a GPU lane per memory segment. ConvNeXt's backward paired a channels-last
        store (unit stride along the channels) with an (N, H, W, C) one matched to the
        kernel's (N, C, H, W) dims (unit stride along the width)."""
        if g.has_reduction:  # per-row and per-element stores differ by design there
            return False
        own = _unit_dims(simplify_index(g.write_in_kernel(member)), loop)
        if not own:
            return False
        for n in g.nodes:
            if n is member or reshape_crosses_dims(n.ranges, g.xsizes):
                continue
            other = _unit_dims(simplify_index(g.write_in_kernel(n)), loop)
            if other and not (own & other):
                return True
        return False

    def _xr_members_coalesced(self, g: FusionGroup) -> bool:
        """A pointwise member placed inside a reduction's loop ("xr") walks its elements in
        the reduction's (x, r) order. When that order has no unit stride in the member's
        memory (a channels-last tensor visited in the order of a chunk-major split reduction),
        every GPU lane would touch its own memory segment: it then runs as its own kernel,
        which tiles for its layout."""
        if not g.has_reduction:
            return True
        loop = list(zip([*g.xvars, *g.rvars], [*g.xsizes, *g.rsizes]))
        for n in g.nodes:
            if g.placements[n.name] != "xr":
                continue
            if not _unit_dims(simplify_index(g.write_in_kernel(n)), loop):
                return False
        return True

    def _legal(self, g: FusionGroup) -> bool:
        """Every read of a buffer written in the kernel hits the element that the same
        iteration wrote (so no thread reads another thread's result)."""
        writes = {n.name: g.write_in_kernel(n) for n in g.nodes}
        for n in g.nodes:
            for name, index, indirect in g.reads_in_kernel(n):
                if name in writes:
                    if indirect:
                        return False
                    if sympy.expand(index - writes[name]) != 0 and _unsplit(index) != _unsplit(
                        writes[name]
                    ):
                        return False
        return True

    # ------------------------------------------------------------------------- order
    def _topological(self, groups):
        group_of = {}
        for g in groups:
            for nm in g.names:
                group_of[nm] = g
        deps = {id(g): set() for g in groups}
        for g in groups:
            for n in g.nodes:
                for d in n.deps:
                    if d in group_of and group_of[d] is not g:
                        deps[id(g)].add(id(group_of[d]))
        done, out = set(), []
        pending = sorted(groups, key=lambda g: g.order)
        while pending:
            for g in pending:
                if deps[id(g)] <= done:
                    out.append(g)
                    done.add(id(g))
                    pending.remove(g)
                    break
            else:  # pragma: no cover - the cycle check makes this unreachable
                raise RuntimeError("cycle between fused kernels")
        return out

    # ---------------------------------------------------------------------- reporting
    def describe(self) -> str:
        lines = ["# fusion decisions", *self.fusion_log, "# kernels"]
        lines += [f"{i}: {g.describe()}" for i, g in enumerate(self.groups)]
        return "\n".join(lines)
