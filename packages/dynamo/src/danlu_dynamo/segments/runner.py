"""The segment path's runner: per-code caches of compiled segments, guard checks, graph
breaks, and the eager stepper between segments.

A frame runs as a chain of *segments*.  A segment starts at a bytecode offset with a concrete
frame state (locals, stack, cells), is traced into a graph, and ends either at the frame's
return or at a graph break; at a break the unsupported instruction runs eagerly and the next
segment starts after it.  Segments are cached per (code object, start offset) and guarded.
"""

from __future__ import annotations

import inspect
import logging
import time
import types

import torch

from .. import config, eval_frame
from ..capture.eager_step import FrameState, Returned, in_try_region, step
from ..capture.exc import GraphBreakError, Unsupported
from ..capture.module_hooks import no_global_hooks, plain
from ..capture.output_graph import OutputGraph, Rebuilder, compile_source
from ..capture.translator import BreakAt, root_translator
from ..capture.variables.contexts import with_block_open
from ..capture_context import (
    MAX_RESTARTS,
    SKIP_CODE_FLAGS,
    CaptureContext,
    GraphBreak,
    code_location,
    is_user_code,
    log,
    log_breaks,
    log_graph,
    log_guards,
    log_recompiles,
    thread_state,
)


class _RunCtx:
    __slots__ = ("L", "G", "C", "K", "outs", "memo")

    def __init__(self, L, G, C, K, outs):
        self.L, self.G, self.C, self.K, self.outs = L, G, C, K, outs
        self.memo = {}


class Segment:
    def __init__(self):
        self.check = None
        self.fetch = None
        self.compiled = None
        self.kind = "return"  # "return" | "break" | "eager_call"
        self.ret = None
        self.locals_fns = {}
        self.stack_fns = []
        self.cell_fns = {}
        self.replays = []
        self.break_offset = None
        self.kw_names = None
        self.gm = None
        self.guards = None
        self.graph_break = None
        self.capture_time = 0.0
        self.num_ops = 0
        self.dynamic = {}  # input source -> symbolic dims
        self.shape_env = None

    def run(self, fs: FrameState):
        L = fs.snapshot()
        inputs = self.fetch(L, fs.G, fs.C, fs.K)
        outs = self.compiled(*inputs) if self.compiled is not None else ()
        ctx = _RunCtx(L, fs.G, fs.C, fs.K, outs)
        if self.kind in ("return", "eager_call"):
            value = self.ret(ctx)
            _replay(self.replays, ctx)
            raise Returned(value)
        new_locals = {n: f(ctx) for n, f in self.locals_fns.items()}
        new_stack = [f(ctx) for f in self.stack_fns]
        new_cells = {n: f(ctx) for n, f in self.cell_fns.items()}
        _replay(self.replays, ctx)
        fs.L = new_locals
        fs.stack = new_stack
        fs.K = new_cells
        fs.kw_names = self.kw_names
        fs.offset = self.break_offset


def _replay(replays, ctx):
    vals = [(get(ctx), apply) for get, apply in replays]
    for v, apply in vals:
        apply(v)


class CodeCache:
    def __init__(self):
        self.entries: dict[int, list[Segment]] = {}
        self.failed: set[int] = set()


# ---------------------------------------------------------------------------------- entry


def run_function(ctx: CaptureContext, fn, args, kwargs):
    """Call ``fn(*args, **kwargs)`` through capture."""
    code = fn.__code__
    if code.co_flags & SKIP_CODE_FLAGS or not is_user_code(code):
        return fn(*args, **kwargs)
    simple = _simple_positional(code)
    if simple is not None and not kwargs and len(args) == len(simple):
        L = dict(zip(simple, args))
    else:
        try:
            bound = _signature(fn).bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # let Python raise its own argument error
        bound.apply_defaults()
        L = dict(bound.arguments)
    fs = FrameState(code, fn, L, fn.__globals__, fn.__closure__ or (), {}, [], None, 0)
    fs.entry = (args, kwargs)
    prev = thread_state.ctx
    thread_state.ctx = ctx
    try:
        return run_state(ctx, fs)
    finally:
        thread_state.ctx = prev


_sig_cache: dict = {}
_simple_cache: dict = {}


def _simple_positional(code):
    """Argument names when the code takes only plain positional parameters, else None."""
    hit = _simple_cache.get(code, False)
    if hit is False:
        plain = (
            not (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))
            and not code.co_kwonlyargcount
        )
        hit = code.co_varnames[: code.co_argcount] if plain else None
        _simple_cache[code] = hit
    return hit


def _signature(fn):
    s = _sig_cache.get(fn)
    if s is None:
        s = inspect.signature(fn, follow_wrapped=False)
        _sig_cache[fn] = s
    return s


def run_state(ctx: CaptureContext, fs: FrameState):
    """Run a frame's segments. Under the frame hook, only eagerly executed instructions run
    with the hook on: guards, tracing, graphs, rebuilds and replays never start user frames
    that the hook should capture."""
    hook_state = _suspend_hook()
    try:
        return _run_state(ctx, fs, hook_state)
    finally:
        _resume_hook(hook_state)


def _step(fs, call_hook, hook_state):
    _resume_hook(hook_state)
    try:
        step(fs, call_hook)
    finally:
        if hook_state is not _NO_HOOK:
            _suspend_hook()


def _run_state(ctx: CaptureContext, fs: FrameState, hook_state):
    cache = ctx.caches.get(fs.code)
    if cache is None:
        cache = ctx.caches[fs.code] = CodeCache()
    call_hook = _make_call_hook(ctx)
    if 0 in cache.failed and fs.entry is not None:
        args, kwargs = fs.entry
        return fs.fn(*args, **kwargs)  # the whole frame runs eagerly (explain says why)
    line_starts = _line_starts(fs.code)
    resumable = True
    while True:
        off = fs.offset
        if (
            (resumable or off in line_starts)
            and off not in cache.failed
            and not in_try_region(fs.code, off)
        ):
            seg = _lookup(cache, fs)
            if seg is None:
                seg = _compile(ctx, cache, fs)
            if seg is not None:
                if seg.kind == "eager_call" and fs.entry is not None:
                    return fs.fn(*_rebind(fs))
                try:
                    seg.run(fs)
                except Returned as r:
                    return r.value
                # graph break: run the unsupported instruction eagerly
                try:
                    _step(fs, call_hook, hook_state)
                except Returned as r:
                    return r.value
                resumable = True
                continue
            if off == 0 and fs.entry is not None and 0 in cache.failed:
                args, kwargs = fs.entry
                return fs.fn(*args, **kwargs)
        resumable = False
        fs.entry = None
        try:
            _step(fs, call_hook, hook_state)
        except Returned as r:
            return r.value


_line_cache: dict = {}


def _line_starts(code):
    s = _line_cache.get(code)
    if s is None:
        import dis

        s = {i.offset for i in dis.get_instructions(code) if i.starts_line is not None}
        _line_cache[code] = s
    return s


def _rebind(fs):
    # Only used for offset-0 frames: the original arguments in order.
    code = fs.code
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n]
    return [fs.L[n_] for n_ in names[: code.co_argcount]]


def _lookup(cache: CodeCache, fs: FrameState):
    entries = cache.entries.get(fs.offset)
    if not entries:
        return None
    L = fs.snapshot()
    for i, seg in enumerate(entries):
        try:
            ok = seg.check(L, fs.G, fs.C, fs.K)
        except Exception:  # a guard that cannot even be evaluated is a miss
            ok = False
        if ok:
            if i:
                entries.insert(0, entries.pop(i))
            return seg
    return None


def _make_call_hook(ctx):
    def call_hook(fn, args, kwargs):
        target = capturable(fn)
        if target is not None:
            f, pre = target
            return run_function(ctx, f, [*pre, *args], kwargs)
        return fn(*args, **kwargs)

    return call_hook


def capturable(fn):
    """``(function, leading args)`` to run a call of ``fn`` through capture (a user function,
    bound method, or a plain module's ``forward``), else None: it runs as is."""
    if isinstance(fn, types.FunctionType):
        return (fn, ()) if is_user_code(fn.__code__) else None
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return (fn.__func__, (fn.__self__,)) if is_user_code(fn.__func__.__code__) else None
    if isinstance(fn, torch.nn.Module):
        m = fn
        if not (plain(m.__dict__) and no_global_hooks()):
            return None
        fwd = inspect.getattr_static(type(m), "forward", None)
        pre = (m,)
        if isinstance(fwd, staticmethod):  # called without the module
            fwd, pre = fwd.__func__, ()
        elif isinstance(fwd, classmethod):
            fwd, pre = fwd.__func__, (type(m),)
        if isinstance(fwd, types.FunctionType) and is_user_code(fwd.__code__):
            return (fwd, pre)
    return None


# ---------------------------------------------------------------------------------- compile


def _compile(ctx: CaptureContext, cache: CodeCache, fs: FrameState):
    n_entries = len(cache.entries.get(fs.offset, ()))
    if n_entries >= config.recompile_limit:
        log_recompiles.warning(
            "%s:%s offset %d hit the recompile limit (%d); running eagerly",
            fs.code.co_filename,
            fs.code.co_firstlineno,
            fs.offset,
            config.recompile_limit,
        )
        cache.failed.add(fs.offset)
        ctx.eager_reasons.append(f"{code_location(fs.code)}: recompile limit reached")
        return None
    if n_entries:
        log_recompiles.info(
            "recompiling %s (offset %d): guards failed for all %d entries",
            code_location(fs.code),
            fs.offset,
            n_entries,
        )
    t0 = time.perf_counter()
    hook_state = _suspend_hook()
    try:
        seg = _trace_segment_dynamic(ctx, fs, n_entries and cache.entries[fs.offset])
    except GraphBreakError:
        raise
    except Exception as e:
        if not isinstance(e, Unsupported):
            # An internal error must never reach the user: run this code eagerly instead.
            log.warning(
                "internal error capturing %s: %s: %s",
                code_location(fs.code),
                type(e).__name__,
                e,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            e = Unsupported(f"internal capture error {type(e).__name__}: {e}")
        if ctx.fullgraph:
            raise GraphBreakError(f"{e.user_loc or code_location(fs.code)}: {e.reason}") from e
        log_breaks.info(
            "cannot capture %s from offset %d: %s", code_location(fs.code), fs.offset, e.reason
        )
        ctx.eager_reasons.append(
            f"{e.user_loc or code_location(fs.code)}: {e.reason} (ran eagerly)"
        )
        cache.failed.add(fs.offset)
        return None
    finally:
        _resume_hook(hook_state)
    seg.capture_time = time.perf_counter() - t0
    cache.entries.setdefault(fs.offset, []).insert(0, seg)
    ctx.records.append(seg)
    if seg.graph_break is not None:
        ctx.breaks.append(seg.graph_break)
    return seg


_NO_HOOK = object()


def _suspend_hook():
    """Tracing and backend compilation never run under the frame hook."""
    if eval_frame.get_eval_frame() is None:
        return _NO_HOOK
    return eval_frame.set_eval_frame(None)


def _resume_hook(state):
    if state is not _NO_HOOK:
        eval_frame.set_eval_frame(state)


def _trace_segment_dynamic(ctx, fs: FrameState, previous) -> Segment:
    """``_trace_segment`` with the dynamic-shape policy; a symbolic trace that fails falls back
    to static sizes for this segment."""
    policy = ctx.dynamic_policy(fs.code, fs.offset)
    try:
        seg = _trace_segment(ctx, fs, policy)
        if seg.graph_break is None or "symbolic" not in seg.graph_break.reason or not seg.dynamic:
            policy.commit(seg.dynamic)
            policy.note_specialised(seg.shape_env)
            _note_recompile(ctx, fs, previous, policy)
            return seg
        why = seg.graph_break.reason
    except GraphBreakError:
        raise
    except Exception as e:
        if not policy.active or not policy.used:
            raise
        why = f"{type(e).__name__}: {e}"
    msg = f"dynamic shapes: {code_location(fs.code)} traced with static sizes ({why})"
    log_recompiles.info("%s", msg)
    ctx.recompiles.append(msg)
    policy.disabled = True
    seg = _trace_segment(ctx, fs, policy)
    _note_recompile(ctx, fs, previous, policy)
    return seg


def _note_recompile(ctx, fs, previous, policy):
    if not previous:
        return
    L = fs.snapshot()
    failed = None
    for seg in previous:
        why = getattr(seg.check, "failure_reason", None)
        failed = why(L, fs.G, fs.C, fs.K) if why is not None else None
        if failed:
            break
    msg = f"{code_location(fs.code)} offset {fs.offset}: guard failed: {failed or '?'}"
    if policy.notes:
        msg += "; " + "; ".join(policy.notes)
    ctx.recompiles.append(msg)
    log_recompiles.info("recompiled %s", msg)


def _trace_segment(ctx, fs: FrameState, policy=None) -> Segment:
    break_at: set[int] = set()
    reason = None
    for _ in range(MAX_RESTARTS):
        out = OutputGraph(fs.G, dynamic=policy)
        tx = root_translator(
            fs.code,
            fs.G,
            fs.snapshot(),
            fs.K,
            fs.C,
            out,
            start_offset=fs.offset,
            stack_len=len(fs.stack),
            kw_names=fs.kw_names,
        )
        tx.break_offsets = break_at
        out.share_frame_cells(tx.cells)
        try:
            ret = tx.run()
            return _finish(ctx, fs, out, tx, ret, None)
        except BreakAt:
            return _finish(ctx, fs, out, tx, None, reason)
        except Unsupported as e:
            off = tx.current.offset
            if ctx.fullgraph:
                raise GraphBreakError(f"graph break at {e.user_loc}: {e.reason}") from e
            if off in break_at:
                raise
            if off == fs.offset and tx.count <= 1:
                # Breaking at the very first instruction: an empty segment that just steps it.
                reason = GraphBreak(e.reason, e.user_loc, fs.code, off)
                return _empty_break(ctx, fs, out, tx, reason)
            break_at = break_at | {off}
            reason = GraphBreak(e.reason, e.user_loc, fs.code, off)
        finally:
            out.restore_global_state()
    raise Unsupported("too many graph-break restarts")


def _empty_break(ctx, fs, out, tx, reason):
    # No graph: the state is unchanged; guard on nothing but what was read (cheap identity).
    seg = Segment()
    seg.kind = "break"
    seg.check = out.guards.compile()
    seg.guards = out.guards
    seg.fetch = lambda L, G, C, K: ()
    seg.locals_fns = {n: (lambda ctx, n=n: ctx.L[n]) for n in fs.L}
    seg.stack_fns = [(lambda ctx, i=i: ctx.L[f"___stack{i}"]) for i in range(len(fs.stack))]
    seg.cell_fns = {n: (lambda ctx, n=n: ctx.K[n]) for n in fs.K}
    seg.break_offset = fs.offset
    seg.kw_names = fs.kw_names
    seg.graph_break = reason
    log_breaks.info("graph break at %s: %s", reason.user_loc, reason.reason)
    return seg


def _finish(ctx, fs, out: OutputGraph, tx, ret, reason) -> Segment:
    seg = Segment()
    cg = Rebuilder(out)
    if ret is not None:
        seg.kind = "return"
        seg.ret = cg.rebuild(ret)
    else:
        seg.kind = "break"
        seg.break_offset = tx.current.offset
        seg.kw_names = tx.kw_names
        seg.graph_break = reason
        if in_try_region(fs.code, seg.break_offset) and with_block_open(tx.stack):
            raise Unsupported("graph break inside a with block")
        seg.locals_fns = {n: cg.rebuild(v) for n, v in tx.locals.items()}
        seg.stack_fns = [cg.rebuild(v) for v in tx.stack]
        own = set(fs.code.co_cellvars)
        seg.cell_fns = {n: cg.real_cell(c) for n, c in tx.cells.items() if n in own}
        log_breaks.info("graph break at %s: %s", reason.user_loc, reason.reason)
    seg.replays = cg.side_effect_replays()
    nodes = cg.graph_outputs
    out.graph.output(tuple(nodes))
    out.prune_size_nodes()
    seg.dynamic = dict(out.dynamic_dims)
    seg.shape_env = out.shape_env
    seg.guards = out.guards
    seg.check = out.guards.compile()
    if not seg.check(fs.snapshot(), fs.G, fs.C, fs.K):
        # The guards must accept the very state they were built from.
        raise RuntimeError("guard check rejects the traced frame state:\n" + seg.check.source)
    sources = [s.expr for s in out.input_sources]
    seg.fetch = compile_source("(" + "".join(f"{s}, " for s in sources) + ")")
    gm = torch.fx.GraphModule(torch.nn.Module(), out.graph)
    seg.gm = gm
    seg.num_ops = out.num_ops()
    if (
        seg.kind == "return"
        and seg.num_ops == 0
        and fs.offset == 0
        and not seg.replays
        and not any(n.op == "call_function" for n in out.graph.nodes)
    ):
        seg.kind = "eager_call" if _only_positional(fs.code) else seg.kind
    if seg.num_ops > 0:
        log_graph.info(
            "captured graph (%d ops) for %s:\n%s", seg.num_ops, code_location(fs.code), gm.code
        )
        seg.compiled = ctx.backend(gm, list(out.input_values))
    elif nodes:
        seg.compiled = gm
    log_guards.debug("guards for %s offset %d:\n%s", code_location(fs.code), fs.offset, out.guards)
    return seg


def _only_positional(code):
    return (
        not (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))
        and code.co_kwonlyargcount == 0
    )


__all__ = ["Segment", "capturable", "run_function", "run_state"]
