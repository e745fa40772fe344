"""A compiled program as plain data, and back: what a whole-graph cache stores.

``program_artifact(compiled, graph_artifact)`` describes a static-shape ``CompiledProgram``:
how its inputs and outputs map to the compiled graphs (output slots and the view steps
replayed on them, written inputs, which outputs are differentiable) and, through the
compiler's ``graph_artifact``, the forward and backward graphs themselves. Tensors (captured
constants) come back apart, for the caller to store as raw bytes. ``load_program`` rebuilds a
``CompiledProgram`` that runs the same way, and ``cached_runner`` the call path danlu's
backend uses (inputs guarded by the capture). Programs with symbolic sizes or int inputs are
not described (``NotCacheable``).
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from danlu_aotautograd.joint import OutputSlot, TracedProgram
from danlu_aotautograd.runtime.compiled_function import CompiledProgram
from danlu_aotautograd.tracing.functional_ops import ViewStep

FORMAT = 1


class NotCacheable(Exception):
    """The program cannot be described as plain data (the message says why)."""


def _value(v, tensors: dict, name: str):
    if isinstance(v, torch.Tensor):
        tensors[name] = v
        return {"tensor": name}
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).removeprefix("torch.")}
    if isinstance(v, torch.device):
        return {"device": str(v)}
    if isinstance(v, torch.memory_format):
        return {"memory_format": str(v).removeprefix("torch.")}
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"value": v}
    if isinstance(v, (list, tuple)):
        items = [_value(x, tensors, f"{name}.{i}") for i, x in enumerate(v)]
        return {"list" if isinstance(v, list) else "tuple": items}
    raise NotCacheable(f"{name}: a {type(v).__name__}")


def _unvalue(spec: dict, tensors: dict):
    if "tensor" in spec:
        return tensors[spec["tensor"]]
    for kind in ("dtype", "memory_format"):
        if kind in spec:
            v = getattr(torch, spec[kind], None)
            if not isinstance(v, (torch.dtype, torch.memory_format)):
                raise ValueError(f"unknown {kind} {spec[kind]!r}")
            return v
    if "device" in spec:
        return torch.device(spec["device"])
    if "list" in spec:
        return [_unvalue(s, tensors) for s in spec["list"]]
    if "tuple" in spec:
        return tuple(_unvalue(s, tensors) for s in spec["tuple"])
    if "value" in spec:
        return spec["value"]
    raise ValueError(f"unknown value description {sorted(spec)}")


def _op(func) -> dict:
    if not isinstance(func, torch._ops.OpOverload):
        raise NotCacheable(f"view step {func} is not an ATen operator")
    return {"op": func._schema.name, "overload": func._overloadname}


def _unop(spec: dict):
    ns, _, name = spec["op"].partition("::")
    return getattr(getattr(getattr(torch.ops, ns), name), spec["overload"] or "default")


def _slot(slot: OutputSlot, tensors: dict, k: int) -> dict:
    chain = [
        {
            **_op(s.func),
            "args": _value(tuple(s.args), tensors, f"slot{k}.args"),
            "kwargs": {n: _value(v, tensors, f"slot{k}.{n}") for n, v in s.kwargs.items()},
            "index": s.index,
        }
        for s in slot.chain
    ]
    return {
        "kind": slot.kind,
        "index": slot.index,
        "chain": chain,
        "value": _value(slot.value, tensors, f"slot{k}.value"),
        "detach": slot.detach,
    }


def _unslot(spec: dict, tensors: dict) -> OutputSlot:
    chain = tuple(
        ViewStep(
            _unop(s),
            tuple(_unvalue(s["args"], tensors)),
            {n: _unvalue(v, tensors) for n, v in s["kwargs"].items()},
            s["index"],
        )
        for s in spec["chain"]
    )
    return OutputSlot(
        spec["kind"], spec["index"], chain, _unvalue(spec["value"], tensors), spec["detach"]
    )


def program_artifact(compiled: CompiledProgram, graph_artifact) -> tuple[dict, dict]:
    """``(meta, tensors)``; ``graph_artifact(compiled_graph) -> (meta, tensors)`` describes
    each compiled graph (the compiler's own, e.g. danlu_inductor.artifacts.graph_artifact)."""
    prog = compiled.program
    if prog.shape_env is not None or prog.int_inputs:
        raise NotCacheable("symbolic sizes")
    try:
        out_spec = pytree.treespec_dumps(prog.out_spec)
    except Exception as e:
        raise NotCacheable(f"output structure: {type(e).__name__}: {e}") from e
    if compiled.lazy_inputs:  # rare; the loaded program would not resolve them
        raise NotCacheable("negative or conjugate view inputs")
    tensors: dict = {}
    graphs = {}
    for role, fn in (("forward", compiled.forward), ("backward", compiled.backward)):
        if fn is None:
            continue
        meta, graph_tensors = graph_artifact(fn)
        graphs[role] = meta
        tensors.update({f"{role}.{k}": v for k, v in graph_tensors.items()})
    meta = {
        "format": FORMAT,
        "joint": prog.joint,
        "num_inputs": prog.num_inputs,
        "input_requires_grad": list(prog.input_requires_grad),
        "num_roots": prog.num_roots,
        "written_inputs": list(prog.written_inputs),
        "root_differentiable": list(prog.root_differentiable),
        "slots": [_slot(s, tensors, k) for k, s in enumerate(prog.slots)],
        "out_spec": out_spec,
        "graphs": graphs,
        "saved_layouts_promised": compiled.saved_layouts_promised,
    }
    return meta, tensors


def load_program(meta: dict, tensors: dict, load_graph) -> CompiledProgram:
    """The ``CompiledProgram`` ``meta`` describes; ``load_graph(meta, tensors)`` rebuilds a
    compiled graph (the compiler's own, e.g. danlu_inductor.artifacts.load_graph)."""
    if meta.get("format") != FORMAT:
        raise ValueError(f"compiled-program format {meta.get('format')!r}, expected {FORMAT}")
    compiled = {}
    for role, graph_meta in meta["graphs"].items():
        prefix = f"{role}."
        mine = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        compiled[role] = load_graph(graph_meta, mine)
    prog = TracedProgram(
        graph_module=None,
        joint=meta["joint"],
        num_inputs=meta["num_inputs"],
        input_requires_grad=list(meta["input_requires_grad"]),
        num_roots=meta["num_roots"],
        written_inputs=list(meta["written_inputs"]),
        root_differentiable=list(meta["root_differentiable"]),
        slots=[_unslot(s, tensors) for s in meta["slots"]],
        out_spec=pytree.treespec_loads(meta["out_spec"]),
    )
    loaded = CompiledProgram(prog, compiled["forward"], compiled.get("backward"), None, None)
    loaded.saved_layouts_promised = bool(meta.get("saved_layouts_promised", False))
    return loaded


def cached_runner(compiled: CompiledProgram, module, example_args: list, slow_path):
    """What ``AotModule.guarded_runner`` returns, for a loaded program of ``module`` (the
    captured graph: its parameters and buffers come first among the inputs, as aot_module
    orders them). The inputs' metadata is guarded by the capture; the grad mode and storage
    offsets are checked here, and a call that differs (or writes to aliased inputs) takes
    ``slow_path(*args)`` (a full compile)."""
    from danlu_aotautograd.api import _aliased_write, _module_state

    state = _module_state(module)[1]
    if len(state) + len(example_args) != compiled.program.num_inputs:
        raise NotCacheable("the cached program takes other inputs")
    offset_of = torch.Tensor.storage_offset
    offsets = list(map(offset_of, example_args))
    grad = torch.is_grad_enabled()
    written = compiled.program.written_inputs

    def run(*args):
        try:
            same = torch.is_grad_enabled() is grad and list(map(offset_of, args)) == offsets
        except TypeError:
            same = False
        inputs = [*state, *args]
        if not same or (written and _aliased_write(inputs, written)):
            return slow_path(*args)
        return compiled(inputs)

    return run
