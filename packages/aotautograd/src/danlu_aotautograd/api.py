"""Public entry points: aot_function, aot_module, aot_graph, aot_backend, aot_eager."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten

from danlu_aotautograd.compiler_promises import (
    promise_backward,
    promise_forward,
    promise_inference,
)
from danlu_aotautograd.cse import eliminate_common_subexpressions
from danlu_aotautograd.errors import AotNotSupported
from danlu_aotautograd.joint import trace_program
from danlu_aotautograd.partition import min_cut_partition
from danlu_aotautograd.runtime.boxed import BoxedGraph
from danlu_aotautograd.runtime.compiled_function import (
    CompiledProgram,
    lazy_view_positions,
    resolve_lazy_views,
    storage_address,
)
from danlu_aotautograd.softmax_stats import split_softmax_rows
from danlu_aotautograd.tracing.attention_masks import unit_stride_attention_masks
from danlu_primtorch.tracing.tracer import TracingError

Compiler = Callable[[fx.GraphModule, list], Callable]

log = logging.getLogger("danlu_aotautograd")


def _resolve_decompositions(decompositions) -> dict:
    if decompositions is None:
        return {}
    if isinstance(decompositions, str):
        import danlu_primtorch

        return danlu_primtorch.decomposition_table(level=decompositions)
    return dict(decompositions)


def _placeholder_values(gm: fx.GraphModule) -> list:
    return [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]


def _plain_tensors(values) -> bool:
    # tensors (subclasses and fakes included) are pytree leaves: a list of them flattens to
    # itself, with a spec that depends on its length only
    return all(isinstance(a, torch.Tensor) for a in values)


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


def _all_dims(index: int, t: torch.Tensor):
    return tuple(range(t.dim())) or None


def _dims_plan(dynamic) -> Callable | None:
    """``dynamic`` as a function ``(tensor index, tensor) -> dims or None``."""
    if dynamic is False or dynamic is None:
        return None
    if dynamic is True:
        return _all_dims
    if callable(dynamic):
        return dynamic
    raise TypeError(
        f"dynamic must be a bool or a callable (index, tensor) -> dims, got {dynamic!r}"
    )


class BoundProgram:
    """A dynamic-shape compilation bound to one set of input sizes (its symbol values)."""

    def __init__(self, compiled: CompiledProgram, binding: dict):
        self.compiled = compiled
        self.binding = binding

    def __call__(self, flat: list):
        return self.compiled(flat, self.binding)

    def __getattr__(self, name):
        return getattr(self.compiled, name)


def _offset_views(flat: list, plan: dict) -> bool:
    """Whether an input to be traced with symbolic sizes starts past its storage's start. Its
    symbolic fake starts at offset 0, and ops that address the storage (``as_strided``, and
    the decompositions built on it such as ``diagonal``'s) would bake that 0 in; such calls
    are compiled for their static shapes and offsets instead (the offset is in the key)."""
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    return any(tensors[i].storage_offset() for i in plan)


def _call_values(flat: list, tensors: list, program) -> dict:
    """The values of a dynamic program's sources for this call: symbolic sizes and strides of
    its tensor inputs and its symbolic int inputs (``primals_int_j``)."""
    values = _size_values(tensors, program.dynamic_inputs)
    for j, k in enumerate(program.int_inputs):
        values[f"primals_int_{j}"] = flat[k]
    return values


def _size_values(tensors: list, dynamic_inputs: dict) -> dict:
    """``{"primals_i.size(d)": n, "primals_i.stride(d)": s}`` for the inputs traced symbolic."""
    values = {}
    for i in dynamic_inputs:
        t = tensors[i]
        for d in range(t.dim()):
            values[f"primals_{i}.size({d})"] = t.shape[d]
            values[f"primals_{i}.stride({d})"] = t.stride(d)
    return values


class AotFunction:
    """A function compiled ahead of time, retraced for each new input signature.

    The signature is: grad mode (training when grad is on and some tensor input requires grad,
    inference otherwise), each tensor's shape, strides, dtype, device and requires_grad, and
    the value of every non-tensor argument.

    With ``dynamic`` (True, or a callable ``(tensor index, tensor) -> dims``) the chosen sizes
    are traced as symbols: the signature keeps only those tensors' rank, dtype, device and
    requires_grad, and a compilation is reused for new sizes while the shape guards recorded in
    its ShapeEnv hold (checked once per new concrete signature). When they fail, it traces
    again (``stats["retraces"]``, ``retrace_reasons``, and an INFO log on
    ``danlu_aotautograd``).
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
        dynamic=False,
        size_args: Callable[[], dict] | None = None,
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
        # specs of flat positional tensor arguments, per count, and their cheap keys: a
        # TreeSpec hashes by walking its whole tree in Python, on every call
        self._flat_specs: dict[int, object] = {}
        self._flat_spec_keys: dict[int, tuple] = {}
        self.compiled: list[CompiledProgram] = []  # every compilation, oldest first
        self.dims_for = _dims_plan(dynamic)
        # non-tensor inputs that are sizes of tensor inputs (a capture's SymInt inputs):
        # flat position -> (tensor index, dim); traced as that symbolic size
        self.size_args = size_args
        self.dynamic_entries: dict = {}  # signature without symbolic sizes -> compilations
        self.dynamic_refused: set = set()  # such signatures whose symbolic trace failed
        self.stats = {
            "traces": 0,
            "retraces": 0,
            "guard_checks": 0,
            "guard_hits": 0,
            "cse_removed": 0,
            "softmax_rows_split": 0,
        }
        self.retrace_reasons: list[str] = []

    def _key(self, flat: list, spec) -> tuple:
        joint = torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in flat
        )
        extra = self.extra_key() if self.extra_key else ()
        inputs = [_input_key(a) for a in flat]
        if self.dims_for is not None and self.size_args is not None:
            positions = [k for k, a in enumerate(flat) if isinstance(a, torch.Tensor)]
            for k, where in self.size_args().items():
                if where is None:  # an int traced as a symbol of its own
                    if type(flat[k]) is not int:
                        raise AotNotSupported(
                            f"input {k} was captured as a symbolic int, got "
                            f"{type(flat[k]).__name__} in this call"
                        )
                    # the value keys this call's binding (its guards are checked once per
                    # value); the dynamic key drops it
                    inputs[k] = ("SymInt", flat[k])
                    continue
                ti, d = where
                t = flat[positions[ti]]
                if flat[k] != t.shape[d]:
                    raise AotNotSupported(
                        f"input {k} ({flat[k]}) was captured as size {d} of tensor input "
                        f"{ti}, which is {t.shape[d]} in this call"
                    )
                inputs[k] = ("S", ti, d)
        return (joint, self._flat_spec_keys.get(id(spec), spec), extra, tuple(inputs))

    def _flatten(self, args, kwargs):
        """``tree_flatten((args, kwargs))``, with one cached spec per count of positional
        tensor arguments (a captured graph's inputs)."""
        if kwargs or not _plain_tensors(args):
            return tree_flatten((args, kwargs))
        return list(args), self.cached_spec(len(args), lambda: tree_flatten((args, kwargs))[1])

    def cached_spec(self, counts, make):
        """The spec ``make()`` gives for inputs that are only plain tensors, ``counts`` of
        them per group: one object per ``counts``, keyed cheaply."""
        spec = self._flat_specs.get(counts)
        if spec is None:
            spec = self._flat_specs[counts] = make()
            self._flat_spec_keys[id(spec)] = ("plain tensors", counts)
        return spec

    def _plan(self, flat: list) -> dict:
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        plan = {}
        for i, t in enumerate(tensors):
            dims = self.dims_for(i, t)
            if dims is True:
                dims = tuple(range(t.dim()))
            if dims:
                plan[i] = tuple(sorted({d % t.dim() for d in dims}))
        if self.size_args is not None:
            for where in self.size_args().values():
                if where is not None:
                    ti, d = where
                    plan[ti] = tuple(sorted({*plan.get(ti, ()), d}))
        return plan

    def _int_args(self) -> list[int]:
        """Flat positions of the int inputs traced as symbols of their own."""
        if self.dims_for is None or self.size_args is None:
            return []
        return [k for k, where in self.size_args().items() if where is None]

    def _dynamic_key(self, key: tuple, flat: list, plan: dict) -> tuple:
        joint, spec, extra, inputs = key
        tensors = iter(range(len(flat)))
        out = []
        for a, k in zip(flat, inputs):
            if isinstance(a, torch.Tensor):
                i = next(tensors)
                if i in plan:
                    k = ("D", a.dim(), plan[i], a.dtype, a.device, a.requires_grad)
            elif k[0] == "SymInt":  # a symbolic int: any value
                k = ("SymInt",)
            out.append(k)
        return (joint, spec, extra, tuple(out))

    def compile_for(self, flat: list, spec) -> CompiledProgram | BoundProgram | None:
        """Trace and compile for these inputs (only their metadata is read; with dynamic
        shapes, real tensors are needed)."""
        try:
            key = self._key(flat, spec)
        except AotNotSupported as e:
            if self.on_unsupported == "raise":
                raise
            warnings.warn(f"danlu_aotautograd: running eagerly: {e}", stacklevel=3)
            return None
        if key in self.cache:
            return self.cache[key]
        if self.dims_for is not None:
            plan = self._plan(flat)
            if (plan or self._int_args()) and not _offset_views(flat, plan):
                self.cache[key] = self._compile_dynamic(key, flat, spec, plan)
                return self.cache[key]
        if key not in self.cache:
            try:
                self.cache[key] = self._compile(flat, spec, joint=key[0])
            except AotNotSupported as e:
                if self.on_unsupported == "raise":
                    raise
                warnings.warn(f"danlu_aotautograd: running eagerly: {e}", stacklevel=3)
                self.cache[key] = None
        return self.cache[key]

    def _compile_dynamic(self, key, flat: list, spec, plan: dict):
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        dynamic_key = self._dynamic_key(key, flat, plan)
        if dynamic_key in self.dynamic_refused:  # traced per static shape from then on
            return self._compile_static_or_eager(flat, spec, key[0])
        entries = self.dynamic_entries.setdefault(dynamic_key, [])
        failed: list[str] = []
        for compiled in reversed(entries):
            env = compiled.program.shape_env
            values = _call_values(flat, tensors, compiled.program)
            self.stats["guard_checks"] += 1
            failed = env.failed_guards(values)
            if not failed:
                self.stats["guard_hits"] += 1
                return BoundProgram(compiled, env.bind(values))
        if entries:
            shapes = [tuple(tensors[i].shape) for i in sorted(plan)]
            reason = f"input sizes {shapes}: shape guards failed: {'; '.join(failed)}"
            self.stats["retraces"] += 1
            self.retrace_reasons.append(reason)
            log.info("danlu_aotautograd: tracing again: %s", reason)
        try:
            compiled = self._compile(flat, spec, joint=key[0], dynamic_dims=plan)
        except (AotNotSupported, TypeError, NotImplementedError, TracingError) as e:
            # TypeError / NotImplementedError: a decomposition or meta function that wants a
            # number where the trace has a symbol; TracingError: a symbolic value the graph
            # cannot compute (``n ** 0.5``). A real error shows again in the static trace.
            if self.on_unsupported == "raise":
                raise
            warnings.warn(
                f"danlu_aotautograd: dynamic shapes unsupported here ({type(e).__name__}: {e}); "
                "compiling for each static shape instead",
                stacklevel=4,
            )
            self.dynamic_refused.add(dynamic_key)
            return self._compile_static_or_eager(flat, spec, key[0])
        entries.append(compiled)
        env = compiled.program.shape_env
        return BoundProgram(compiled, env.bind(_call_values(flat, tensors, compiled.program)))

    def _compile_static_or_eager(self, flat: list, spec, joint: bool):
        try:
            return self._compile(flat, spec, joint=joint)
        except AotNotSupported as e:
            warnings.warn(f"danlu_aotautograd: running eagerly: {e}", stacklevel=5)
            return None

    def _compile(self, flat: list, spec, *, joint: bool, dynamic_dims=None) -> CompiledProgram:
        """A static program (``dynamic_dims=None``) is kept under its inputs' exact sizes and
        strides (``_input_key``) and called only with such inputs, so its forward (or
        inference) graph says so to its compiler: ``meta["input_layouts_fixed"]``; a compiler
        may then skip checking or copying their layouts. The backward's saved values whose
        strides the compiled forward reports get the promise too (a list, one flag per
        backward input); incoming gradients do not."""
        timings = {}
        self.stats["traces"] += 1
        lazy = lazy_view_positions(flat)
        if lazy:  # traced, and later called, with those inputs resolved
            flat = resolve_lazy_views(flat, lazy)
        program = trace_program(
            self.fn,
            flat,
            spec,
            joint=joint,
            decompositions=self.decompositions,
            dynamic_dims=dynamic_dims,
            size_args=self.size_args() if dynamic_dims is not None and self.size_args else None,
        )
        timings["trace"] = program.trace_seconds
        start = time.perf_counter()
        self.stats["cse_removed"] += eliminate_common_subexpressions(program.graph_module)
        timings["cse"] = time.perf_counter() - start
        if joint:
            start = time.perf_counter()
            self.stats["softmax_rows_split"] += split_softmax_rows(
                program.graph_module, num_fw_outputs=program.num_fw_outputs
            )
            partition = self.partition_fn(
                program.graph_module, num_fw_outputs=program.num_fw_outputs
            )
            timings["partition"] = time.perf_counter() - start
            start = time.perf_counter()
            promise_forward(program, partition.forward, partition.backward, dynamic_dims)
            fw = self.fw_compiler(partition.forward, _placeholder_values(partition.forward))
            bw_inputs = promise_backward(program, fw, partition.backward, dynamic_dims)
            bw = self.bw_compiler(partition.backward, bw_inputs)
            timings["compile"] = time.perf_counter() - start
            compiled = CompiledProgram(program, fw, bw, partition, partition.forward, timings)
            compiled.saved_layouts_promised = bool(
                partition.backward.meta.get("input_layouts_fixed")
            )
        else:
            gm = program.graph_module
            promise_inference(program, gm, dynamic_dims)
            start = time.perf_counter()
            fw = self.inference_compiler(gm, _placeholder_values(gm))
            timings["compile"] = time.perf_counter() - start
            compiled = CompiledProgram(program, fw, None, None, gm, timings)
        compiled.lazy_inputs = lazy
        self.compiled.append(compiled)
        return compiled

    def __call__(self, *args, **kwargs):
        flat, spec = self._flatten(args, kwargs)
        compiled = self.compile_for(flat, spec)
        if compiled is None or not self.independent_writes(flat, compiled):
            return self.fn(*args, **kwargs)
        return compiled(flat)

    def independent_writes(self, flat: list, compiled) -> bool:
        """False (after a warning) when inputs the program writes share memory with other
        inputs: the compiled program assumed them independent, so the call runs eagerly.
        Raises instead with ``on_unsupported="raise"``."""
        why = compiled.program.written_inputs and _aliased_write(
            flat, compiled.program.written_inputs
        )
        if not why:
            return True
        if self.on_unsupported == "raise":
            raise AotNotSupported(why)
        warnings.warn(f"danlu_aotautograd: running eagerly: {why}", stacklevel=4)
        return False


def _aliased_write(flat: list, written: list[int]) -> str | None:
    """Why the inputs cannot be written independently (two share memory and the program
    writes one of them), or None."""
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    addresses = list(map(storage_address, tensors))
    if len(set(addresses)) == len(addresses):  # the usual case, without a Python loop
        return None
    storages = {}
    for i, ptr in enumerate(addresses):
        if ptr in storages and (i in written or storages[ptr] in written):
            return (
                f"inputs {storages[ptr]} and {i} share memory and the program writes to one of "
                "them; the compiled program assumed they were independent"
            )
        storages[ptr] = i
    return None


def aot_function(
    fn: Callable,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
    dynamic=False,
) -> AotFunction:
    """Compile ``fn`` ahead of time: trace forward+backward at ATen level, functionalize,
    partition with ``partition_fn`` and hand the graphs to the compilers.

    Compilers are called as ``compiler(gm, example_inputs)`` and return a callable taking the
    graph's inputs positionally (flat tensors) and returning its outputs as a tuple.
    ``example_inputs`` are the graph's placeholder values: metadata-only fake tensors
    (``ShadowTensor``: shape, strides, dtype and real device). ``decompositions``: ``None``
    (default: keep ATen ops as autograd produced them), ``"canonical"`` or ``"prims"`` (a
    danlu_primtorch table) or a dict ``OpOverload -> fn``.

    ``dynamic``: ``False`` (default) traces again for every new input shape; ``True`` traces
    every size of every tensor input as a symbol (sizes 0 and 1 stay specialised) and reuses
    the compilation while its shape guards hold; a callable ``(tensor index, tensor) -> dims``
    (or None) chooses the symbolic dims per tensor input.
    """
    return AotFunction(
        fn,
        fw_compiler,
        bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
        dynamic=dynamic,
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
        user_dims = _dims_plan(options.pop("dynamic", False))
        self._num_state = 0
        dynamic = None
        if user_dims is not None:
            # parameters and buffers keep static sizes; user inputs follow ``dynamic``

            def dynamic(index, t):
                if index < self._num_state:
                    return None
                return user_dims(index - self._num_state, t)

        user_size_args = options.pop("size_args", None)
        size_args = None
        if user_size_args:

            def size_args():  # user positions -> positions after the lifted parameters
                n = self._num_state
                return {
                    n + k: None if where is None else (n + where[0], where[1])
                    for k, where in user_size_args.items()
                }

        self.aot = AotFunction(
            self._functional_call,
            extra_key=lambda: tuple(m.training for m in module.modules()),
            on_unsupported=on_unsupported,
            dynamic=dynamic,
            size_args=size_args,
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
        self._num_state = len(state)
        if kwargs or not (_plain_tensors(state) and _plain_tensors(args)):
            return tree_flatten(((state, args, kwargs), {}))
        spec = self.aot.cached_spec(
            (len(state), len(args)), lambda: tree_flatten(((state, args, kwargs), {}))[1]
        )
        return [*state, *args], spec

    def compile_for(self, *args, **kwargs) -> CompiledProgram | None:
        """Trace and compile for these example inputs (metadata only) without running."""
        return self.aot.compile_for(*self._inputs(args, kwargs))

    def guarded_runner(self, example_args: list) -> Callable | None:
        """A call path for tensor inputs whose metadata the caller guards: a capture checks
        each input's type, dtype, device, requires_grad, sizes and strides, and the grad mode,
        before it calls the graph. It skips the per-input signature (and the walk over the
        module's state) and checks only what captures do not guard: the grad mode, cheaply,
        and the storage offsets, which ``as_strided`` reads. Anything else goes the full way.
        None where the examples are not all plain tensors or did not compile."""
        if not _plain_tensors(example_args):
            return None
        flat, spec = self._inputs(list(example_args), {})
        compiled = self.aot.compile_for(flat, spec)
        if not isinstance(compiled, CompiledProgram):  # eager, or bound to symbolic sizes
            return None
        state = flat[: self._num_state]
        offset_of = torch.Tensor.storage_offset
        offsets = list(map(offset_of, example_args))
        grad = torch.is_grad_enabled()
        written = compiled.program.written_inputs

        def run(*args):
            try:
                same = torch.is_grad_enabled() is grad and list(map(offset_of, args)) == offsets
            except TypeError:  # not all tensors: the caller broke the contract
                same = False
            if not same:
                return self(*args)
            inputs = [*state, *args]
            if written and _aliased_write(inputs, written):
                return self(*args)  # the full path says why and runs eagerly (or raises)
            return compiled(inputs, all_tensors=True)  # map(offset_of) took tensors only

        return run

    def bound_runner(self) -> Callable:
        """``guarded_runner``'s counterpart for a symbolic capture (tensors and size ints):
        the capture guards every static input's metadata, so a call needs only the values
        that bind the program's symbols (its symbolic inputs' sizes and strides, its int
        inputs), the grad mode and the storage offsets to find the program bound to them.
        The first call of each such key takes the full way (the program's shape guards,
        retracing where they fail); so does any call that is not of the program the first
        one bound (``BoundProgram``), or whose inputs are not as the first call's."""
        bound: dict = {}
        plan: dict = {}  # tensor positions, int positions, symbolic tensor positions
        offset_of = torch.Tensor.storage_offset

        def full(args):
            out = self(*args)
            flat, spec = self._inputs(args, {})  # as the call made them: the same key
            got = self.aot.compile_for(flat, spec)
            if isinstance(got, BoundProgram) and (not plan or plan["program"] is got.compiled):
                if not plan:
                    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
                    program = got.compiled.program
                    plan.update(
                        program=got.compiled,
                        tensors=tensors,
                        ints=[i for i, a in enumerate(args) if type(a) is int],
                        symbolic=[
                            tensors[i - self._num_state]
                            for i in program.dynamic_inputs
                            if i >= self._num_state
                        ],
                        written=program.written_inputs,
                        state=flat[: self._num_state],
                    )
                bound[key_of(args)] = got
            return out

        def key_of(args):
            sym = [args[i] for i in plan["symbolic"]]
            return (
                torch.is_grad_enabled(),
                tuple(map(offset_of, [args[i] for i in plan["tensors"]])),
                tuple(tuple(t.shape) + t.stride() for t in sym),
                tuple(args[i] for i in plan["ints"]),
            )

        def run(*args):
            if not plan:
                return full(args)
            try:
                hit = bound.get(key_of(args))
            except (TypeError, AttributeError, IndexError):  # not the first call's inputs
                return self(*args)
            if hit is None:
                return full(args)
            inputs = [*plan["state"], *args]
            if plan["written"] and _aliased_write(inputs, plan["written"]):
                return self(*args)  # the full path says why and runs eagerly (or raises)
            return hit(inputs)

        return run

    def forward(self, *args, **kwargs):
        flat, spec = self._inputs(args, kwargs)
        compiled = self.aot.compile_for(flat, spec)
        if compiled is None or not self.aot.independent_writes(flat, compiled):
            return self.orig_module(*args, **kwargs)
        return compiled(flat)


def aot_module(
    module: torch.nn.Module,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
    dynamic=False,
) -> AotModule:
    """Like aot_function for ``module.forward``; parameters and buffers become graph inputs
    (first, in ``named_parameters`` then ``named_buffers`` order), and buffer updates (e.g.
    BatchNorm running statistics) are written back to the module after each call.

    ``dynamic`` applies to the tensors passed to ``forward`` (index ``i`` counts those only);
    parameters and buffers keep static sizes."""
    return AotModule(
        module,
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
        dynamic=dynamic,
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
    dynamic=None,
    guarded_inputs: bool = False,
) -> Callable:
    """Compile a captured graph (``gm(*example_inputs)``) now, for the current grad mode.

    Returns a callable taking the same flat inputs. Parameters and buffers held by ``gm`` are
    lifted to inputs. A later call under another grad mode or with other input metadata
    compiles again.

    ``dynamic=None`` (default): when some example input carries symbolic sizes (a capture with
    dynamic shapes; ``node.meta["val"]`` of its placeholders), those dims are traced as symbols
    at the first call, and SymInt inputs that equal such a size are read from that tensor; the
    compilation serves every size its shape guards allow. All-static examples compile now, for
    those shapes. ``True``: every dim of every tensor input symbolic; ``False``: never.

    ``guarded_inputs=True``: the caller guarantees that every call's tensor inputs have the
    examples' type, dtype, device, requires_grad, sizes and strides, under the same grad mode
    (a capture's guards check exactly that before calling); calls then skip the per-input
    signature (``AotModule.guarded_runner``). Only all-tensor, static graphs take it.
    """
    if isinstance(gm, fx.GraphModule):
        unit_stride_attention_masks(gm)
    described = _described_inputs(gm, example_inputs)
    symbolic = not all(_static(x) for x in described)
    if dynamic is None:
        dynamic = symbolic
    plan, size_args = _example_plan(described) if dynamic and symbolic else (True, None)
    compiled = AotModule(
        gm,
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        inference_compiler=inference_compiler,
        on_unsupported=on_unsupported,
        dynamic=plan if dynamic else False,
        size_args=size_args,
    )
    fast = None
    if not symbolic and not dynamic:
        if guarded_inputs:
            fast = compiled.guarded_runner(example_inputs)
        else:
            compiled.compile_for(*example_inputs)
    elif guarded_inputs and symbolic and dynamic:
        fast = compiled.bound_runner()
    # else: compile at the first call (dynamic: from real tensors, with symbolic sizes; a
    # symbolic example without dynamic: for the concrete shapes seen then, per signature)

    def run(*args):
        return compiled(*args)

    run = fast or run
    run.aot_module = compiled
    return run


def _described_inputs(gm, example_inputs: list) -> list:
    """The graph's own description of its inputs where it has one (placeholder
    ``meta["val"]``, or ``meta["example_value"]`` from torch's capture), else the examples."""
    graph = getattr(gm, "graph", None)
    if graph is None:
        return list(example_inputs)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return list(example_inputs)
    described = []
    for n, x in zip(placeholders, example_inputs):
        val = n.meta.get("val", n.meta.get("example_value"))
        same_kind = isinstance(val, torch.Tensor) == isinstance(x, torch.Tensor)
        described.append(val if val is not None and same_kind else x)
    return described


def _example_plan(example_inputs: list):
    """Which dims of the tensor inputs are symbolic in a capture's example inputs, and which
    non-tensor inputs are one of those sizes: ``(dims_for, size_args)``."""
    dims: dict[int, tuple] = {}
    where: dict[str, tuple[int, int]] = {}  # printed symbolic size -> (tensor index, dim)
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    for i, t in enumerate(tensors):
        sym = tuple(d for d, s in enumerate(t.shape) if not isinstance(s, int))
        if sym:
            dims[i] = sym
        for d in sym:
            where.setdefault(str(t.shape[d]), (i, d))
    size_args = {}
    for k, x in enumerate(tree_flatten(list(example_inputs))[0]):
        if isinstance(x, torch.SymInt):
            # a size of a tensor input is read from it; any other SymInt (an int argument
            # the capture made symbolic) is traced as a symbol of its own
            size_args[k] = where.get(str(x))
    return (lambda i, t: dims.get(i)), (size_args or None)


def aot_backend(
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    *,
    partition_fn: Callable = min_cut_partition,
    decompositions=None,
    inference_compiler: Compiler | None = None,
    dynamic=None,
    guarded_inputs: bool = False,
) -> Callable:
    """A capture backend ``backend(gm, example_inputs) -> callable`` built on aot_graph.

    Graphs it cannot trace or functionalize run eagerly, with a warning that says why.
    ``dynamic`` as in aot_graph (None: symbolic where the capture's example inputs are); a
    graph that cannot be traced with symbolic sizes is compiled per static shape instead,
    with a warning. ``guarded_inputs`` as in aot_graph: True for a capture that guards its
    inputs' metadata and the grad mode (danlu_dynamo's and torch's both do).
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
            dynamic=dynamic,
            guarded_inputs=guarded_inputs,
        )

    backend.fw_compiler = fw_compiler
    return backend


def run_graph(gm: fx.GraphModule, example_inputs: list) -> Callable:
    """The eager "compiler": run the graph op by op (boxed: each value is freed after its
    last use, inputs included)."""
    return BoxedGraph(gm)


aot_eager = aot_backend(run_graph)
aot_eager.__doc__ = "Capture backend: AOT tracing and partitioning, graphs run eagerly."
