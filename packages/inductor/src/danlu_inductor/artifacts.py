"""A compiled graph as plain data, and back: what a whole-graph cache stores.

``graph_artifact(compiled)`` describes a ``CompiledGraph`` by its wrapper source, its kernels'
sources (C++ functions or Triton kernels), its constants and its output structure; tensors
(graph constants) are returned apart, for the caller to store as raw bytes.
``load_graph(meta, tensors)`` rebuilds an equivalent ``CompiledGraph``: the C++ library and the
Triton module come from their sources through the kernel caches (a warm cache loads, a cold
one compiles), so nothing is unpickled and no traced graph is needed.

A graph wrapped for CUDA graph replays (mode="reduce-overhead") is described by the graph
it replays plus the replay settings its wrapping decided (the inputs it mutates, those whose
layouts the caller promises, whether outputs are handed over); loading wraps it again, and
the loaded runner warms up, captures and replays like a fresh one.

Not describable (``NotCacheable`` says why): a graph that runs eagerly (``EagerGraph``), one
whose constants hold something other than tensors, numbers, dtypes, devices, strings and
ATen operators.
"""

from __future__ import annotations

import os

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.codegen.cpp.backend import CppBackend
from danlu_inductor.codegen.triton.backend import TritonBackend
from danlu_inductor.cudagraphs import CudaGraphRunner
from danlu_inductor.pipeline.compiled import CompiledGraph, FirstCallGuard
from danlu_inductor.pipeline.steps import load_call

FORMAT = 1
# Triton graphs are described and loaded by the same code as C++ ones; loaded graphs were
# checked against eager on the H200 (GPT-2 12x768 training: a warm start in a new process and
# from an imported bundle, benchmarks/compile_time.py). DANLU_TRITON_GRAPH_CACHE=0 leaves
# them out of the cache.
_TRITON_ARTIFACTS = os.environ.get("DANLU_TRITON_GRAPH_CACHE", "1") != "0"


class NotCacheable(Exception):
    """The compiled object cannot be described as plain data (the message says why)."""


def _encode_const(value, tensors: dict, name: str):
    if isinstance(value, torch.Tensor):
        tensors[name] = value
        return {"tensor": name}
    if isinstance(value, torch._ops.OpOverload):
        return {"op": value._schema.name, "overload": value._overloadname}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, (list, tuple)):
        items = [_encode_const(v, tensors, f"{name}.{i}") for i, v in enumerate(value)]
        return {"list" if isinstance(value, list) else "tuple": items}
    raise NotCacheable(f"constant {name} is a {type(value).__name__}")


def _decode_const(spec: dict, tensors: dict):
    if "tensor" in spec:
        return tensors[spec["tensor"]]
    if "op" in spec:
        ns, _, op = spec["op"].partition("::")
        packet = getattr(getattr(torch.ops, ns), op)
        return getattr(packet, spec["overload"] or "default")
    if "dtype" in spec:
        dtype = getattr(torch, spec["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {spec['dtype']!r}")
        return dtype
    if "device" in spec:
        return torch.device(spec["device"])
    if "list" in spec:
        return [_decode_const(s, tensors) for s in spec["list"]]
    if "tuple" in spec:
        return tuple(_decode_const(s, tensors) for s in spec["tuple"])
    if "value" in spec:
        return spec["value"]
    raise ValueError(f"unknown constant description {sorted(spec)}")


def graph_artifact(compiled) -> tuple[dict, dict]:
    """``(meta, tensors)`` for a compiled graph; raises ``NotCacheable``."""
    replay = None
    if isinstance(compiled, CudaGraphRunner):
        replay = compiled.settings()
        compiled = compiled.compiled
    if not isinstance(compiled, CompiledGraph):
        reason = getattr(compiled, "report", {}).get("fallback_reason")
        raise NotCacheable(reason or f"{type(compiled).__name__} is not a generated graph")
    build = getattr(compiled, "build", None)
    if build is None:
        raise NotCacheable("the graph was built without its sources")
    if compiled.report.get("backend") == "triton" and not _TRITON_ARTIFACTS:
        raise NotCacheable("Triton graphs are left out (DANLU_TRITON_GRAPH_CACHE=0)")
    if compiled.report.get("fallback_reason"):
        raise NotCacheable(f"the graph runs eagerly: {compiled.report['fallback_reason']}")
    try:
        out_spec = pytree.treespec_dumps(compiled.out_spec)
    except Exception as e:
        raise NotCacheable(f"output structure: {type(e).__name__}: {e}") from e
    tensors: dict = {}
    consts = {k: _encode_const(v, tensors, k) for k, v in compiled.consts.items()}
    report = {
        k: v
        for k, v in compiled.report.items()
        if isinstance(v, (bool, int, float, str, type(None)))
        or (isinstance(v, dict) and all(isinstance(x, (int, str)) for x in v.values()))
    }
    meta = {
        "format": FORMAT,
        "backend": compiled.report.get("backend"),
        "wrapper": compiled.wrapper_source,
        "build": build,
        "consts": consts,
        "out_spec": out_spec,
        "report": report,
    }
    if replay is not None:
        meta["cudagraphs"] = replay
    return meta, tensors


def load_graph(meta: dict, tensors: dict):
    """The ``CompiledGraph`` ``meta`` describes (see ``graph_artifact``)."""
    if meta.get("format") != FORMAT:
        raise ValueError(f"compiled-graph format {meta.get('format')!r}, expected {FORMAT}")
    backend = meta["backend"]
    build = meta["build"]
    consts = {k: _decode_const(v, tensors) for k, v in meta["consts"].items()}
    wrapper_name = "<danlu_inductor wrapper (cached)>"
    report = dict(meta["report"], cached=True)
    report.pop("first_run_s", None)  # this process's first call writes its own
    if backend == "cpp":
        fns, _, source = CppBackend().build(
            build["names"], build["sources"], build["nargs"], build["nsizes"]
        )
        call = load_call(meta["wrapper"], wrapper_name, fns, consts)
    elif backend == "triton":
        device = torch.device(build["device"])
        fns, _, source = TritonBackend().build(build["names"], build["sources"])
        consts = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in consts.items()}
        inner = load_call(meta["wrapper"], wrapper_name, fns, consts, device)
        call = FirstCallGuard(
            inner,
            None,
            report,
            check_err=build["check_err"],
            written=build.get("written_inputs", ()),
        )
    else:
        raise ValueError(f"unknown graph backend {backend!r}")
    out_spec = pytree.treespec_loads(meta["out_spec"])
    compiled = CompiledGraph(call, out_spec, meta["wrapper"], source, None, None, report)
    compiled.consts = consts
    compiled.build = build
    if backend == "triton":  # what a CUDA graph runner reads after each replay
        compiled.err_flag = getattr(inner, "err_flag", None)
    replay = meta.get("cudagraphs")
    if replay is not None:
        return CudaGraphRunner.from_settings(compiled, replay)
    return compiled
