"""Find where a compiled graph starts to disagree with eager: an accuracy bisect.

A wrong answer from a large model is hard to read from its final output. This module keeps
the ATen graphs a compile hands to its graph compiler (`record_graphs`), then compiles growing
prefixes of one graph and compares each against the same prefix run eagerly
(`find_divergence`). A prefix returns every value it computes that the rest of the graph still
reads, so an error anywhere in it shows up; the first prefix that disagrees ends at the node
to look at. The prefixes are cut at tensor-valued nodes and searched by bisection (about
log2(nodes) compiles).

    graphs = danlu.accuracy.record_graphs(model, inputs)        # compiles with "inductor"
    for g in graphs:
        report = danlu.accuracy.find_divergence(g.gm, g.inputs)
        print(report)
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils import _pytree as pytree


@dataclasses.dataclass
class RecordedGraph:
    kind: str  # "forward", "backward" or "inference"
    gm: torch.fx.GraphModule
    inputs: list  # clones of the real inputs of the graph's first call


@dataclasses.dataclass
class Divergence:
    """The result of `find_divergence`."""

    whole_graph_error: float  # the worst relative error of the whole graph's outputs
    node: str | None  # the first node whose prefix disagrees (None: no prefix does)
    error: float | None  # that prefix's worst relative error
    prefix_error_before: float | None  # the prefix ending one candidate earlier
    compiles: int
    detail: str

    def __str__(self) -> str:
        return self.detail


def _clone(x):
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def record_graphs(fn, args, kwargs=None, *, mode=None) -> list[RecordedGraph]:
    """Compile `fn` with danlu's inductor backend, call it once with `args`, and return the
    ATen graphs it handed to inductor with copies of their example inputs."""
    import danlu

    from .backends import aot_pipeline, inductor_compiler
    from .inductor_options import resolve

    graphs: list[RecordedGraph] = []
    inner = inductor_compiler(resolve(mode, None))

    def recording(gm, example_inputs, record=None, label="graph"):
        # the example inputs are fakes: keep the real inputs of the first call instead
        entry = RecordedGraph(label.split(" ")[0], gm, [])
        graphs.append(entry)
        compiled = inner(gm, example_inputs, record=record, label=label)
        boxed = getattr(compiled, "_boxed_call", False)

        def run(*args):
            flat = args[0] if boxed else args
            if not entry.inputs:
                entry.inputs = [_clone(x) for x in flat]
            return compiled(*args)

        run._boxed_call = boxed
        return run

    backend = aot_pipeline(recording, decompositions="canonical")
    compiled = danlu.compile(fn, backend=backend)
    compiled(*args, **(kwargs or {}))
    return graphs


def relative_error(actual, expected) -> float:
    """The worst relative root-mean-square error over the tensors of two results (inf when
    shapes, dtypes or non-finite positions disagree)."""
    worst = 0.0
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return float("inf")
    for a, e in zip(a_leaves, e_leaves):
        if not isinstance(e, torch.Tensor):
            if a != e:
                return float("inf")
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            return float("inf")
        if not (e.is_floating_point() or e.is_complex()):
            if not torch.equal(a, e):
                return float("inf")
            continue
        a64, e64 = a.detach().double(), e.detach().double()
        if not torch.equal(torch.isfinite(a64), torch.isfinite(e64)):
            return float("inf")
        finite = torch.isfinite(e64)
        if not torch.equal(a64[~finite].nan_to_num(), e64[~finite].nan_to_num()):
            return float("inf")
        if finite.any():
            diff = (a64[finite] - e64[finite]).pow(2).mean().sqrt()
            scale = e64[finite].pow(2).mean().sqrt().clamp_min(1e-6)
            worst = max(worst, float(diff / scale))
    return worst


def _is_tensor_node(n: torch.fx.Node) -> bool:
    return n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)


def prefix_graph(gm: torch.fx.GraphModule, last: torch.fx.Node) -> torch.fx.GraphModule:
    """The graph up to `last`, returning every tensor it computes that a later node (or the
    output) reads, plus `last` itself."""
    nodes = list(gm.graph.nodes)
    cut = nodes.index(last)
    inside = set(nodes[: cut + 1])
    graph = torch.fx.Graph()
    env: dict = {}
    for n in nodes[: cut + 1]:
        env[n] = graph.node_copy(n, lambda a: env[a])
    live = [
        n
        for n in nodes[: cut + 1]
        if _is_tensor_node(n) and (n is last or any(u not in inside for u in n.users))
    ]
    graph.output(tuple(env[n] for n in live))
    return torch.fx.GraphModule(gm, graph)


def _run_eager(gm, inputs):
    with torch.no_grad():
        return gm(*[_clone(x) for x in inputs])


def _run_compiled(gm, inputs, compiler):
    compiled = compiler(gm, [_clone(x) for x in inputs])
    with torch.no_grad():
        return compiled(*[_clone(x) for x in inputs])


def _default_compiler(gm, inputs):
    import danlu_inductor

    return danlu_inductor.compile_fx(gm, inputs)


def find_divergence(gm, inputs, compiler=None, *, tol: float = 0.05) -> Divergence:
    """Bisect `gm` for the first tensor node at which `compiler`'s result for the prefix
    ending there differs from eager by more than `tol` (relative root-mean-square error).

    `compiler(gm, inputs) -> callable` defaults to danlu_inductor's `compile_fx`."""
    compiler = compiler or _default_compiler
    compiles = 0

    def error_of(sub):
        nonlocal compiles
        compiles += 1
        return relative_error(_run_compiled(sub, inputs, compiler), _run_eager(sub, inputs))

    whole = error_of(gm)
    candidates = [n for n in gm.graph.nodes if _is_tensor_node(n)]
    if whole <= tol or not candidates:
        return Divergence(
            whole, None, None, None, compiles, f"whole graph within tolerance ({whole:.3g})"
        )
    errors: dict[int, float] = {}
    lo, hi = 0, len(candidates) - 1  # invariant: the prefix ending at candidates[hi] diverges
    errors[hi] = error_of(prefix_graph(gm, candidates[hi]))
    if errors[hi] <= tol:
        return Divergence(
            whole,
            None,
            None,
            None,
            compiles,
            f"the whole graph disagrees (error {whole:.3g}) but no prefix does: the error "
            "needs the whole graph's fusion decisions",
        )
    while lo < hi:
        mid = (lo + hi) // 2
        errors[mid] = error_of(prefix_graph(gm, candidates[mid]))
        if errors[mid] > tol:
            hi = mid
        else:
            lo = mid + 1
    node = candidates[hi]
    before = errors.get(hi - 1)
    args = ", ".join(str(a) for a in node.args)
    detail = (
        f"whole graph error {whole:.3g}; first diverging node {node.name} = "
        f"{node.target}({args}) (prefix error {errors[hi]:.3g}, "
        f"prefix before it {before if before is None else f'{before:.3g}'}), "
        f"{compiles} compiles"
    )
    return Divergence(whole, node.name, errors[hi], before, compiles, detail)
