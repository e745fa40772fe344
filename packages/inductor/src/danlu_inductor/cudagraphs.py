"""``cudagraphs`` option (mode="reduce-overhead"): replay each compiled graph as a CUDA graph.

Call 1 runs the compiled graph normally (warm-up: Triton compiles and autotunes, cuBLAS
makes its handles). Call 2 captures it and replays. Later calls copy the inputs into the
captured static buffers and replay. An input that sat at the same address on the two calls
before a capture (parameters, buffers) is read in place, not copied; if its address changes
later, it is copied from then on and the graph is captured again (at most
``MAX_RECAPTURES`` times, then replays stop).
Graphs are captured into one memory pool per device. A result must stay valid after the
next call. Outputs are cloned out of the pool after each replay (the cost: one copy of each
output; GPT-2's logits are 412 MB), except for graphs whose caller hands the outputs on and
keeps none (``meta["outputs_handed_over"]``: aotautograd's inference graphs). Those return
the graph's own output tensors; before each replay the runner counts the references to
their memory (``torch._C._storage_Use_Count``), and while the caller still holds an earlier
result (or a view of one) the call runs without the graph, into fresh memory. At the
``MAX_HELD_CALLS``-th such call the runner captures the graph again, into memory of its own,
and clones from then on. The gather bounds flag is read once after the replay (one sync when
the graph has gathers), not inside the captured region.

Not captured, with the reason in ``report["cudagraphs"]``: graphs that run eagerly, inputs
not on a CUDA device or not tensors (dynamic shapes), ops that sync with the CPU or have
data-dependent shapes, RNG with an explicit generator, mutation of a view of an input.
Inputs mutated in place are copied back after each replay.
"""

from __future__ import annotations

import logging
import weakref

import torch
from torch.utils import _pytree as pytree

from danlu_inductor.runtime import PLAIN_TENSOR_TYPES, FlagWatch, extension

log = logging.getLogger("danlu_inductor")


def _bind_address_check():
    """``_replay_checks.same_addresses`` (C++, reads the tensors' data pointers), or None where
    it was not built, or was built against another torch."""
    _replay_checks = extension("_replay_checks")
    if _replay_checks is None:
        return None
    _replay_checks.bind(PLAIN_TENSOR_TYPES)
    return _replay_checks.same_addresses


_same_addresses = _bind_address_check()

MAX_RECAPTURES = 4
MAX_HELD_CALLS = 3  # calls that found an earlier result still held, before cloning again

_aten = torch.ops.aten
SYNCING_OPS = {
    "aten::_local_scalar_dense",
    "aten::item",
    "aten::nonzero",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::unique_dim",
    "aten::repeat_interleave",
    "aten::_assert_async",
    "aten::equal",
    "aten::is_nonzero",
}

_POOLS: dict = {}


def _pool(device):
    """(memory pool handle, the graphs captured into it) for ``device``: graphs of one device
    share one pool. The allocator releases a pool when the last graph captured into it is
    freed (``danlu.reset()``, a recompile), and a capture into the old handle then fails an
    internal check (run 73) and leaves the CUDA generator expecting a capture: a fresh pool
    once no graph of the old one is alive."""
    entry = _POOLS.get(device)
    if entry is None or not entry[1]:
        entry = (torch.cuda.graph_pool_handle(), weakref.WeakSet())
        _POOLS[device] = entry
    return entry


def unsafe_reason(compiled, gm, example_inputs):
    """Why this graph cannot be replayed as a CUDA graph (None when it can), and the
    indices of the inputs it mutates in place."""
    if not hasattr(compiled, "_call"):
        return f"the graph runs eagerly ({compiled.report.get('fallback_reason')})", ()
    if compiled.report.get("dynamic"):
        return "symbolic sizes (a captured graph replays one size)", ()
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            return f"input {i} is a {type(x).__name__}, not a tensor (dynamic shapes)", ()
        if x.device.type != "cuda":
            return f"input {i} is on {x.device} (CUDA graphs need CUDA tensors)", ()
    return graph_hazards(gm)


def graph_hazards(gm):
    """(why the graph's ops cannot be captured or None, indices of inputs it mutates)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    mutated = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        if schema.name in SYNCING_OPS:
            return (
                f"{node.name} ({schema.name}) syncs with the CPU or has data-dependent shapes",
                (),
            )
        if node.kwargs.get("generator") is not None:
            return f"{node.name} draws random numbers from an explicit generator", ()
        for arg, value in zip(schema.arguments, node.args):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            root = _alias_root(value)
            if root is None:
                continue
            if root is not value:
                return f"{node.name} mutates a view of input {root.name}", ()
            mutated.add(index[root])
        for k, value in node.kwargs.items():
            arg = next((a for a in schema.arguments if a.name == k), None)
            if arg is not None and arg.alias_info is not None and arg.alias_info.is_write:
                root = _alias_root(value)
                if root is not None and root is not value:
                    return f"{node.name} mutates a view of input {root.name}", ()
                if root is not None:
                    mutated.add(index[root])
    return None, tuple(sorted(mutated))


def _alias_root(value):
    """The placeholder a value is (or is a view of), else None."""
    seen = 0
    while isinstance(value, torch.fx.Node) and seen < 100:
        seen += 1
        if value.op == "placeholder":
            return value
        t = value.target
        if not isinstance(t, torch._ops.OpOverload):
            return None
        rets = t._schema.returns
        if not rets or rets[0].alias_info is None or not value.args:
            return None
        value = value.args[0]
    return None


def wrap_cudagraphs(compiled, gm, example_inputs):
    reason, mutated = unsafe_reason(compiled, gm, example_inputs)
    if reason is not None:
        compiled.report["cudagraphs"] = f"skipped: {reason}"
        log.info("danlu_inductor: CUDA graphs skipped: %s", reason)
        return compiled
    return CudaGraphRunner(
        compiled,
        mutated,
        promised_layouts(gm, len(example_inputs)),
        share_outputs=bool(gm.meta.get("outputs_handed_over")),
    )


def _use_count(storage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)


def promised_layouts(gm, n: int) -> frozenset:
    """The inputs whose sizes and strides the caller promises to keep (aotautograd's static
    programs: ``meta["input_layouts_fixed"]``, True or one flag per input)."""
    fixed = gm.meta.get("input_layouts_fixed")
    if isinstance(fixed, (list, tuple)):
        return frozenset(i for i, f in enumerate(fixed) if f)
    return frozenset(range(n)) if fixed else frozenset()


class CudaGraphRunner:
    """A compiled graph replayed as a CUDA graph (see the module doc).

    A replay's host work comes before the GPU's, so it adds to every call: the inputs read in
    place are checked by one comparison of their addresses (sizes and strides too, for
    inputs whose layouts the caller does not promise), and only the other inputs are
    visited to be copied. ResNet-50 has 320 inputs read in place; a check of each one's
    address, sizes and strides cost about 1 us apiece. The addresses are read from the
    tensors in C++ where ``_replay_checks`` is built (320: 26 -> 4 us on the 2-core machine),
    through ``data_ptr()`` elsewhere."""

    def __init__(self, compiled, mutated, fixed_layouts=frozenset(), share_outputs=False):
        self.compiled = compiled
        # return the graph's own outputs while the caller holds none of them (module doc)
        self.share_outputs = share_outputs and hasattr(torch._C, "_storage_Use_Count")
        self.shared = None  # [(storage, references when the runner alone holds it)]
        self.held_calls = 0
        self.report = compiled.report
        self.mutated = set(mutated)
        self.fixed_layouts = frozenset(fixed_layouts)
        self.out_spec = compiled.out_spec
        self.report["cudagraphs"] = "warm-up"
        self.graph = None
        self.prev_ptrs = None
        self.captures = 0
        self.replays = 0
        self.static_idx: set[int] = set()
        self.disabled = None
        err = getattr(compiled, "err_flag", None)
        self.flag_watch = FlagWatch(err) if err is not None else None

    def settings(self) -> dict:
        """What the wrapping decided, as plain data (a graph cache entry keeps it)."""
        return {
            "mutated": sorted(self.mutated),
            "fixed_layouts": sorted(self.fixed_layouts),
            "share_outputs": bool(self.share_outputs),
        }

    @classmethod
    def from_settings(cls, compiled, settings: dict) -> CudaGraphRunner:
        """A runner for ``compiled`` (a graph loaded from the cache) as ``settings`` say."""
        return cls(
            compiled,
            [int(i) for i in settings["mutated"]],
            frozenset(int(i) for i in settings["fixed_layouts"]),
            share_outputs=bool(settings["share_outputs"]),
        )

    def __getattr__(self, name):  # loop_ir(), wrapper_source, artifacts, ...
        return getattr(self.compiled, name)

    @property
    def num_kernels(self):
        return self.compiled.num_kernels

    # ------------------------------------------------------------------------ call
    def __call__(self, *args):
        if self.disabled is not None:
            return self.compiled(*args)
        if self.graph is not None:
            if self._static_ok(args):
                return self._replay(args)
            # an input read in place moved: from now on it is copied; capture again
            static = self.static_idx - self._moved(args)
            self.graph = None
            if self.captures > MAX_RECAPTURES:
                return self._disable("inputs read in place keep changing address", args)
        else:
            ptrs = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
            if self.prev_ptrs is None:  # warm-up
                self.prev_ptrs = ptrs
                return self.compiled(*args)
            # read in place: the inputs at the same address on the two calls before a capture
            static = {i for i, p in enumerate(ptrs) if p is not None and p == self.prev_ptrs[i]}
        self._capture(args, static)
        if self.disabled is not None:
            return self.compiled(*args)
        return self._replay(args)

    def _disable(self, why, args):
        self._stop(why)
        return self.compiled(*args)

    def _stop(self, why):
        """No more replays: the compiled graph runs as it is from now on."""
        self.disabled = why
        self.graph = None
        self.report["cudagraphs"] = f"stopped: {why}"
        log.warning("danlu_inductor: CUDA graph replays stopped: %s", why)

    def _restrided(self, args):
        """The inputs read in place whose sizes or strides differ from the captured ones
        (only those whose layouts the caller does not promise are looked at)."""
        return {
            i
            for i, shape, stride in self.layout_checked
            if args[i].stride() != stride or args[i].shape != shape
        }

    def _moved(self, args):
        out = {i for i, p in zip(self.static_order, self.static_ptrs) if args[i].data_ptr() != p}
        return out | self._restrided(args)

    def _static_ok(self, args):
        same = None
        if _same_addresses is not None:  # (args: the call's tuple)
            same = _same_addresses(args, self.static_order, self.static_ptrs)
        if same is None:  # not built, or a tensor it does not read: torch's data_ptr()
            same = [args[i].data_ptr() for i in self.static_order] == list(self.static_ptrs)
        return same and not self._restrided(args)

    def _capture(self, args, static):
        self.graph = None
        self.static_idx = set(static)
        self.static_inputs = []
        guard = self.compiled._call
        if getattr(guard, "eager", False):
            self._stop("the graph fell back to eager")
            return
        for i, a in enumerate(args):
            if i in self.static_idx:
                self.static_inputs.append(a)
            else:
                buf = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                self.static_inputs.append(buf)
        # what a replay checks and copies, in the order it does
        self.static_order = tuple(sorted(self.static_idx))
        self.static_ptrs = tuple(args[i].data_ptr() for i in self.static_order)
        # the layouts as captured (an input read in place is often the very object passed
        # later: resized in place, it would compare equal to itself)
        self.layout_checked = [
            (i, args[i].shape, args[i].stride())
            for i in self.static_order
            if i not in self.fixed_layouts
        ]
        self.copied = [i for i in range(len(args)) if i not in self.static_idx]
        self.copied_back = [i for i in self.copied if i in self.mutated]
        device = args[0].device if args else torch.device("cuda")
        try:
            raw = getattr(guard, "call", guard)  # no bounds-flag read inside the capture
            g, outs = self._record(raw, list(self.static_inputs), device)
        except Exception as e:  # a sync or allocation the capture refuses
            self.static_inputs = []
            self._stop(f"capture failed: {type(e).__name__}: {str(e)[:200]}")
            return
        copied = {self.static_inputs[i].untyped_storage().data_ptr() for i in self.copied}
        self.keep_alias = []
        for o in outs:
            alias = isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in copied
            if alias:
                self.static_inputs = []
                self._stop("an output aliases an input that is copied each call")
                return
            self.keep_alias.append(
                isinstance(o, torch.Tensor)
                and any(
                    o.untyped_storage().data_ptr() == args[i].untyped_storage().data_ptr()
                    for i in self.static_idx
                )
            )
        self.cloned = [
            i
            for i, (o, keep) in enumerate(zip(outs, self.keep_alias))
            if isinstance(o, torch.Tensor) and not keep
        ]
        self.graph, self.static_outputs = g, outs
        self.shared = None  # counted at the first replay, before any result is handed out
        self.captures += 1
        self.report["cudagraphs"] = (
            f"captured ({self.captures}x); {len(self.static_idx)} of {len(args)} inputs read "
            "in place"
        )

    @staticmethod
    def _record(call, static_inputs, device):
        """Capture ``call(static_inputs)``; -> (graph, its output tensors)."""
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(device)
        handle, graphs = _pool(device)
        with torch.cuda.graph(g, pool=handle):
            outs = call(static_inputs)
        graphs.add(g)
        return g, outs

    def _count_references(self):
        """The references to the graph's output memory while the runner alone holds it (the
        first replay after a capture, before any result was handed out)."""
        storages = {}
        for i in self.cloned:
            st = self.static_outputs[i].untyped_storage()
            storages.setdefault(st.data_ptr(), st)
        self.shared = [(st, _use_count(st)) for st in storages.values()]

    def _held(self) -> bool:
        """Does the caller still hold a result returned from the graph's memory?"""
        return any(_use_count(st) > base for st, base in self.shared)

    def _replay(self, args):
        if self.shared is None:
            if self.share_outputs:
                self._count_references()
        elif self._held():
            # a replay would overwrite a result the caller still holds
            self.held_calls += 1
            if self.held_calls < MAX_HELD_CALLS:
                return self.compiled(*args)  # without the graph, into fresh memory
            # the caller keeps its results: copied from now on, and captured again, into
            # memory of its own (what the caller holds stays the caller's)
            self.share_outputs = False
            self.report["cudagraphs_outputs"] = "copied: the caller keeps results"
            self._capture(args, self.static_idx)
            if self.disabled is not None:
                return self.compiled(*args)
        static_inputs = self.static_inputs
        for i in self.copied:
            a, s = args[i], static_inputs[i]
            if a.shape != s.shape:
                raise ValueError(
                    f"compiled graph expects an input of shape {tuple(s.shape)}, got "
                    f"{tuple(a.shape)}; recompile for new shapes"
                )
            s.copy_(a)
        self.graph.replay()
        self.replays += 1
        if self.flag_watch is not None:
            self.flag_watch.check(" (CUDA graph replay)")
        for i in self.copied_back:
            args[i].copy_(static_inputs[i])
        flat = list(self.static_outputs)
        for i in self.cloned:  # results stay valid after the next replay
            # shared: a tensor object of its own on the graph's memory, so the caller holding
            # it (or a view of it) shows in the memory's reference count (_held)
            flat[i] = flat[i].detach() if self.share_outputs else flat[i].clone()
        return pytree.tree_unflatten(flat, self.out_spec)
