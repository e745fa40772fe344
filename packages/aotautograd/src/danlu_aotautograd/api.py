"""Public entry points: aot_function, aot_module, aot_graph, aot_backend, aot_eager."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten

from danlu_aotautograd.errors import AotNotSupported
from danlu_aotautograd.joint import trace_program
from danlu_aotautograd.partition import min_cut_partition
from danlu_aotautograd.runtime.boxed import BoxedGraph
from danlu_aotautograd.runtime.compiled_function import CompiledProgram

Compiler = Callable[[fx.GraphModule, list], Callable]


def _resolve_decompositions(decompositions) -> dict:
    if decompositions is None:
        return {}
    if isinstance(decompositions, str):
        import danlu_primtorch

        return danlu_primtorch.decomposition_table(level=decompositions)
    return dict(decompositions)


def _placeholder_values(gm: fx.GraphModule) -> list:
    return [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]


def _input_key(x):
    if isinstance(x, torch.Tensor):
        return (
            "T",
            tuple(x.shape),
            tuple(x.stride()),
            x.storage_offset(),
            x.dtype,
            x.device,
            x.requires_grad,
        )
    try:
        hash(x)
        return ("V", type(x), x)
    except TypeError:
        return ("I", id(x))


class AotFunction:
    """A function compiled ahead of time, retraced for each new input signature.

    The signature is: grad mode (training when grad is on and some tensor input requires grad,
    inference otherwise), each tensor's shape, strides, dtype, device and requires_grad, and
    the value of every non-tensor argument.
    """

    def __init__(
        self,
        fn: Callable,
        fw_compiler: Compiler,
        bw_compiler: Compiler | None = None,
        *,
        partition_fn: Callable = min_cut_partition,
        decompositions=None,
        inference_compiler: Compiler | None = None,
        extra_key: Callable[[], tuple] | None = None,
        on_unsupported: str = "raise",
    ):
        self.fn = fn
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.inference_compiler = inference_compiler or fw_compiler
        self.partition_fn = partition_fn
        self.decompositions = _resolve_decompositions(decompositions)
        self.extra_key = extra_key
        self.on_unsupported = on_unsupported
        self.cache: dict = {}
        self.compiled: list[CompiledProgram] = []  # every compilation, oldest first

    def _key(self, flat: list, spec) -> tuple:
        joint = torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in flat
        )
        extra = self.extra_key() if self.extra_key else ()
        return (joint, spec, extra, tuple(_input_key(a) for a in flat))

    def compile_for(self, flat: list, spec) -> CompiledProgram | None:
        """Trace and compile for these inputs (only their metadata is read)."""
        key = self._key(flat, spec)
        if key not in self.cache:
            try:
                self.cache[key] = self._compile(flat, spec, joint=key[0])
            except AotNotSupported as e:
                if self.on_unsupported == "raise":
                    raise
                warnings.warn(f"danlu_aotautograd: running eagerly: {e}", stacklevel=3)
                self.cache[key] = None
        return self.cache[key]

    def _compile(self, flat: list, spec, *, joint: bool) -> CompiledProgram:
        timings = {}
        program = trace_program(
            self.fn, flat, spec, joint=joint, decompositions=self.decompositions
        )
        timings["trace"] = program.trace_seconds
        if joint:
            start = time.perf_counter()
            partition = self.partition_fn(
                program.graph_module, num_fw_outputs=program.num_fw_outputs
            )
            timings["partition"] = time.perf_counter() - start
            start = time.perf_counter()
            fw = self.fw_compiler(partition.forward, _placeholder_values(partition.forward))
            bw = self.bw_compiler(partition.backward, _placeholder_values(partition.backward))
            timings["compile"] = time.perf_counter() - start
            compiled = CompiledProgram(program, fw, bw, partition, partition.forward, timings)
        else:
            gm = program.graph_module
            start = time.perf_counter()
            fw = self.inference_compiler(gm, _placeholder_values(gm))
            timings["compile"] = time.perf_counter() - start
            compiled = CompiledProgram(program, fw, None, None, gm, timings)
        self.compiled.append(compiled)
        return compiled

    def __call__(self, *args, **kwargs):
        flat, spec = tree_flatten((args, kwargs))
        compiled = self.compile_for(flat, spec)
        if compiled is None:
            return self.fn(*args, **kwargs)
        if compiled.program.written_inputs:
            _check_no_aliased_writes(flat, compiled.program.written_inputs)
        return compiled(flat)


def _check_no_aliased_writes(flat: list, written: list[int]) -> None:
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    storages = {}
    for i, t in enumerate(tensors):
        ptr = t.untyped_storage().data_ptr()
        if ptr in storages and (i in written or storages[ptr] in written):
            raise AotNotSupported(
                f"inputs {storages[ptr]} and {i} share memory and the program writes to one of "
                "them; the compiled program assumed they were independent"
            )
        storages[ptr] = i


def aot_function(
    fn: Callable,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
) -> AotFunction:
    """Compile ``fn`` ahead of time: trace forward+backward at ATen level, functionalize,
    partition with ``partition_fn`` and hand the graphs to the compilers.

    Compilers are called as ``compiler(gm, example_inputs)`` and return a callable taking the
    graph's inputs positionally (flat tensors) and returning its outputs as a tuple.
    ``example_inputs`` are the graph's placeholder values: metadata-only fake tensors
    (``ShadowTensor``: shape, strides, dtype and real device). ``decompositions``: ``None``
    (default: keep ATen ops as autograd produced them), ``"canonical"`` or ``"prims"`` (a
    danlu_primtorch table) or a dict ``OpOverload -> fn``.
    """
    return AotFunction(
        fn,
        fw_compiler,
        bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
    )


def _module_state(module: torch.nn.Module):
    """Unique parameters and buffers, each with every name it is reachable under."""
    names: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    ):
        if t is None:
            continue
        names.setdefault(id(t), []).append(name)
        tensors[id(t)] = t
    return [names[k] for k in tensors], list(tensors.values())


def _set_tensor(module: torch.nn.Module, name: str, value):
    *path, attr = name.split(".")
    for p in path:
        module = getattr(module, p)
    table = module._parameters if attr in module._parameters else module._buffers
    old = table[attr]
    table[attr] = value
    return module, table, attr, old


class AotModule(torch.nn.Module):
    """``module`` with its forward compiled by AotFunction; parameters and buffers are inputs."""

    def __init__(self, module: torch.nn.Module, **options):
        super().__init__()
        self.orig_module = module
        on_unsupported = options.pop("on_unsupported", "raise")
        self.aot = AotFunction(
            self._functional_call,
            extra_key=lambda: tuple(m.training for m in module.modules()),
            on_unsupported=on_unsupported,
            **options,
        )

    def _functional_call(self, state, args, kwargs):
        restore = []
        try:
            for name_list, t in zip(self._names, state):
                for name in name_list:
                    restore.append(_set_tensor(self.orig_module, name, t))
            return self.orig_module(*args, **kwargs)
        finally:
            for _, table, attr, old in reversed(restore):
                table[attr] = old

    def _inputs(self, args, kwargs) -> tuple[list, object]:
        names, state = _module_state(self.orig_module)
        self._names = names
        return tree_flatten(((state, args, kwargs), {}))

    def compile_for(self, *args, **kwargs) -> CompiledProgram | None:
        """Trace and compile for these example inputs (metadata only) without running."""
        return self.aot.compile_for(*self._inputs(args, kwargs))

    def forward(self, *args, **kwargs):
        flat, spec = self._inputs(args, kwargs)
        compiled = self.aot.compile_for(flat, spec)
        if compiled is None:
            return self.orig_module(*args, **kwargs)
        if compiled.program.written_inputs:
            _check_no_aliased_writes(flat, compiled.program.written_inputs)
        return compiled(flat)


def aot_module(
    module: torch.nn.Module,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
) -> AotModule:
    """Like aot_function for ``module.forward``; parameters and buffers become graph inputs
    (first, in ``named_parameters`` then ``named_buffers`` order), and buffer updates (e.g.
    BatchNorm running statistics) are written back to the module after each call."""
    return AotModule(
        module,
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
    )


def _static(x) -> bool:
    if isinstance(x, torch.Tensor):
        return all(type(d) is int for d in (*x.shape, *x.stride()))
    return not isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))


def aot_graph(
    gm: torch.nn.Module,
    example_inputs: list,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
    on_unsupported: str = "raise",
) -> Callable:
    """Compile a captured graph (``gm(*example_inputs)``) now, for the current grad mode.

    Returns a callable taking the same flat inputs. Parameters and buffers held by ``gm`` are
    lifted to inputs. A later call under another grad mode or with other input metadata
    compiles again.
    """
    compiled = AotModule(
        gm,
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
        on_unsupported=on_unsupported,
    )
    if all(_static(x) for x in example_inputs):
        compiled.compile_for(*example_inputs)
    # else (symbolic shapes from a capture with dynamic shapes): compile at the first call,
    # for the concrete shapes seen then, and again for each new signature

    def run(*args):
        return compiled(*args)

    run.aot_module = compiled
    return run


def aot_backend(
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
) -> Callable:
    """A capture backend ``backend(gm, example_inputs) -> callable`` built on aot_graph.

    Graphs it cannot trace or functionalize run eagerly, with a warning that says why.
    """

    def backend(gm, example_inputs):
        return aot_graph(
            gm,
            list(example_inputs),
            fw_compiler,
            bw_compiler,
            partition_fn=partition_fn,
            decompositions=decompositions,
            inference_compiler=inference_compiler,
            on_unsupported="eager",
        )

    backend.fw_compiler = fw_compiler
    return backend


def run_graph(gm: fx.GraphModule, example_inputs: list) -> Callable:
    """The eager "compiler": run the graph op by op (boxed: each value is freed after its
    last use, inputs included)."""
    return BoxedGraph(gm)


aot_eager = aot_backend(run_graph)
aot_eager.__doc__ = "Capture backend: AOT tracing and partitioning, graphs run eagerly."
