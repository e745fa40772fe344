"""The default capture path (``config.capture_path = "bytecode"``): the frame hook's callback
traces a frame and answers transformed code plus its guards.

On a cache miss the C hook calls :func:`callback`. The symbolic interpreter runs the frame
(a user function from its start, or a resume function from the instruction it resumes at) on
fake tensors; the result becomes a C cache entry ``GuardedCode(code, check_fn)``:

- ``check_fn(f_locals)``: the trace's guards as one generated Python function;
- ``code``: bytecode with the frame's signature that calls a generated *runner* (fetch graph
  inputs, compiled graph, rebuild, replay side effects) and then returns, or at a graph break
  runs the unsupported instruction in plain Python and calls a resume function
  (``capture/frame_codegen.py``).

So a cache hit is: C hook -> check_fn -> transformed code -> runner -> compiled graph.

What this path cannot emit runs through the segment path instead (``segments/``: a
trampoline into ``segments.runner.run_state``, segments and the eager stepper; the list of
such frames is in its docstring). ``explain`` lists each such frame under "segment path".
"""

from __future__ import annotations

import logging
import time
import types

import torch

from . import config
from . import eval_frame as ef
from .capture.exc import GraphBreakError, Unsupported
from .capture.frame_codegen import (
    RESUME_OF,
    BreakPlan,
    arg_names,
    whole_frame_code,
)
from .capture.output_graph import OutputGraph, Rebuilder
from .capture.runner_codegen import RunnerBuilder
from .capture.runtime_values import NULL
from .capture.source import FrameValues
from .capture.translator import BreakAt, instructions_of, root_translator
from .capture.variables.base import NullVar
from .capture.variables.contexts import with_block_open
from .capture_context import (
    MAX_RESTARTS,
    SKIP_CODE_FLAGS,
    GraphBreak,
    code_location,
    current_context,
    log,
    log_breaks,
    log_graph,
    log_guards,
    log_recompiles,
    thread_state,
    wants_frame,
)
from .segments.hook_entry import callback as segment_callback

# Entries per code object in the C cache, over all contexts (ef.set_cache_limit).
HOOK_CACHE_LIMIT = 64


class CompiledEntry:
    """One cache entry made by the hook path: what explain and the logs report."""

    def __init__(self, code, offset):
        self.code = code
        self.offset = offset
        self.kind = "return"  # "return" | "resume" | "continue"
        self.gm = None
        self.num_ops = 0
        self.guards = None
        self.check_fn = None
        self.runner = None
        self.transformed = None
        self.graph_break = None
        self.capture_time = 0.0


class _SegmentPath(Exception):
    """This frame runs through the segment path (the reason says why)."""


def callback(frame, cache_size):
    code = frame.f_code
    if code.co_flags & SKIP_CODE_FLAGS or not (code in RESUME_OF or wants_frame(frame)):
        ef.mark_skip(code)
        return None
    ctx = current_context()
    if ctx is None:
        return None
    try:
        return compile_frame(ctx, frame, cache_size)
    except GraphBreakError:
        raise
    except _SegmentPath as e:
        ctx.fallbacks.append(f"{code_location(code)}: {e} (runs through the segment path)")
        log_breaks.info("%s: %s; using the segment path", code_location(code), e)
    except Exception as e:
        log.warning(
            "internal error compiling %s: %s: %s; using the segment path",
            code_location(code),
            type(e).__name__,
            e,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        ctx.fallbacks.append(f"{code_location(code)}: internal error {type(e).__name__}: {e}")
    guarded = segment_callback(frame, cache_size)
    if guarded is None:
        return None
    accept = guarded.check_fn

    def check(f_locals):  # this context's entry only: another one decides for itself
        return thread_state.ctx is ctx and accept(f_locals)

    check.failure_reason = lambda f_locals: None if check(f_locals) else "another context"
    return ef.GuardedCode(guarded.code, check)


def compile_frame(ctx, frame, cache_size):
    frame_code = frame.f_code
    original, start, _ = RESUME_OF.get(frame_code, (frame_code, 0, ()))
    # The C cache is per code object and shared by every optimize() context (each entry's
    # check starts with "is my context the active one"); the recompile limit is per context.
    n = ctx.entry_counts.get(frame_code, 0)
    if n >= config.recompile_limit:
        return _run_original(ctx, frame_code, original)
    ctx.entry_counts[frame_code] = n + 1
    failed = _failed_guard(ctx, frame, original, start) if n else None
    if n:
        log_recompiles.info(
            "recompiling %s: guards failed for all %d entries (%s)",
            code_location(original),
            n,
            failed,
        )
    policy = ctx.dynamic_policy(original, start)
    try:
        entry, code, out = _compile_frame(ctx, frame, policy)
        if (
            entry.graph_break is not None
            and "symbolic" in entry.graph_break.reason
            and out.dynamic_dims
        ):
            raise Unsupported(entry.graph_break.reason)
    except GraphBreakError:
        raise
    except Exception as e:
        if not (policy.active and policy.used):
            raise
        why = e.reason if isinstance(e, Unsupported) else f"{type(e).__name__}: {e}"
        msg = f"dynamic shapes: {code_location(original)} traced with static sizes ({why})"
        log_recompiles.info("%s", msg)
        ctx.recompiles.append(msg)
        policy.disabled = True
        entry, code, out = _compile_frame(ctx, frame, policy)
    policy.commit(out.dynamic_dims)
    policy.note_specialised(out.shape_env)
    if n:
        msg = f"{code_location(original)}: guard failed: {failed or '?'}"
        if policy.notes:
            msg += "; " + "; ".join(policy.notes)
        ctx.recompiles.append(msg)
        if policy.notes:
            log_recompiles.info("%s", msg)
    elif policy.notes:
        log_recompiles.info("%s: %s", code_location(original), "; ".join(policy.notes))
    ctx.records.append(entry)
    if entry.graph_break is not None:
        ctx.breaks.append(entry.graph_break)
    log_guards.debug("guards for %s:\n%s", code_location(original), out.guards)
    return ef.GuardedCode(code, entry.check_fn)


def _failed_guard(ctx, frame, original, start):
    """The first failing guard of this context's earlier entries for the frame's code."""
    for e in reversed(ctx.records):
        if isinstance(e, CompiledEntry) and e.code is original and e.offset == start:
            why = getattr(e.check_fn, "failure_reason", None)
            reason = why(frame.f_locals) if why is not None else None
            if reason:
                return reason
    return None


def _compile_frame(ctx, frame, policy):
    frame_code = frame.f_code
    original, start, layout = RESUME_OF.get(frame_code, (frame_code, 0, ()))
    n_stack = len(layout)
    t0 = time.perf_counter()
    f_locals = dict(frame.f_locals)
    for name in frame_code.co_freevars:
        f_locals.pop(name, None)
    for i, null in enumerate(layout):  # NULL slots of calls in progress: pushed by the code
        if null:
            f_locals[f"___stack{i}"] = NULL
    closure = frame.closure or ()
    n_own = len(original.co_cellvars)
    if frame_code is original:
        # Trace-time stand-ins for the frame's own cells (an argument that is a cell holds
        # its value); after the graph the runner uses the running frame's cells.
        cells = {
            n: types.CellType(f_locals.pop(n)) if n in f_locals else types.CellType()
            for n in original.co_cellvars
        }
    else:  # a resume function gets the original's cells, then its closure, as its closure
        cells = dict(zip(original.co_cellvars, closure[:n_own]))
        closure = closure[n_own:]
    entry = CompiledEntry(original, start)
    out, tx, ret, reason = _trace(
        ctx, original, frame.f_globals, f_locals, cells, closure, start, n_stack, policy
    )
    try:
        if ret is not None:
            entry.kind = "return"
            runner = _runner(ctx, frame_code, frame, out, entry, [ret], as_tuple=False)
            code = whole_frame_code(frame_code, original, runner)
        else:
            code, runner = _emit_break(ctx, frame_code, frame, out, tx, entry, reason)
    except Unsupported as e:
        raise _SegmentPath(e.reason) from e
    entry.runner, entry.transformed = runner, code
    entry.guards = out.guards
    entry.check_fn = _check_fn(ctx, out, frame, original)
    if not entry.check_fn(frame.f_locals):
        why = entry.check_fn.failure_reason(frame.f_locals)
        raise RuntimeError(f"the guards reject the frame they were built from: {why}")
    entry.capture_time = time.perf_counter() - t0
    return entry, code, out


def _run_original(ctx, frame_code, original):
    log_recompiles.warning(
        "%s hit the recompile limit (%d); it now runs eagerly",
        code_location(original),
        config.recompile_limit,
    )
    ctx.eager_reasons.append(f"{code_location(original)}: recompile limit reached")

    def active(f_locals):
        return thread_state.ctx is ctx

    active.failure_reason = lambda f_locals: "another capture context (optimize call)"
    return ef.GuardedCode(frame_code, active)


def _trace(ctx, code, f_globals, f_locals, cells, closure, start, n_stack, policy=None):
    break_at: set[int] = set()
    reason = None

    def translator(out):
        return root_translator(
            code, f_globals, f_locals, cells, closure, out, start_offset=start, stack_len=n_stack
        )

    for _ in range(MAX_RESTARTS):
        out = OutputGraph(f_globals, dynamic=policy)
        try:
            tx = translator(out)
        except Unsupported as e:
            out.restore_global_state()
            raise _SegmentPath(f"a value the frame starts with cannot be traced: {e.reason}") from e
        tx.break_offsets = break_at
        out.share_frame_cells(tx.cells)
        try:
            ret = tx.run()
            return out, tx, ret, None
        except BreakAt:
            return out, tx, None, reason
        except Unsupported as e:
            off = tx.current.offset
            if ctx.fullgraph:
                raise GraphBreakError(f"graph break at {e.user_loc}: {e.reason}") from e
            if off in break_at:
                raise _SegmentPath(f"cannot stop before the instruction at {off}") from e
            reason = GraphBreak(e.reason, e.user_loc, code, off)
            if tx.count <= 1:
                # The very first instruction breaks: the state is the frame's own.
                out.restore_global_state()
                out = OutputGraph(f_globals, dynamic=policy)
                tx = translator(out)
                insts, index = instructions_of(code)
                tx.current = insts[index[off]]
                return out, tx, None, reason
            break_at = break_at | {off}
        except Exception as e:
            raise _SegmentPath(f"internal capture error {type(e).__name__}: {e}") from e
        finally:
            out.restore_global_state()
    raise _SegmentPath("too many graph-break restarts")


def _runner(ctx, frame_code, frame, out, entry, values, *, as_tuple):
    cg = Rebuilder(out)
    cg.runtime_cells = True
    original = entry.code
    rb = RunnerBuilder(
        arg_names(frame_code),
        original.co_cellvars,
        original.co_freevars,
        frame.f_globals,
        out,
        cg,
        FrameValues(frame.f_locals, frame.f_globals, original.co_freevars),
    )

    def compiled_for(graph_outputs):
        out.graph.output(tuple(graph_outputs))
        out.prune_size_nodes()
        gm = torch.fx.GraphModule(torch.nn.Module(), out.graph)
        entry.gm = gm
        entry.num_ops = out.num_ops()
        if entry.num_ops > 0:
            log_graph.info(
                "captured graph (%d ops) for %s:\n%s",
                entry.num_ops,
                code_location(entry.code),
                gm.code,
            )
            compiled = ctx.backend(gm, list(out.input_values))
            if getattr(compiled, "__self__", None) is gm and compiled.__name__ == "forward":
                ef.mark_skip(compiled.__func__.__code__)
            return compiled
        if graph_outputs:
            return gm.forward
        return None

    return rb.build(values, as_tuple=as_tuple, compiled_for=compiled_for)


def _emit_break(ctx, frame_code, frame, out, tx, entry, reason):
    original = entry.code
    offset = tx.current.offset
    plan = BreakPlan(
        original,
        offset,
        [isinstance(v, NullVar) for v in tx.stack],
        set(tx.locals),
    )
    if with_block_open(tx.stack):
        raise Unsupported("graph break inside a with block")
    values = [v for v in tx.stack if not isinstance(v, NullVar)]
    values += [tx.locals[n] for n in plan.stored_locals]
    runner = _runner(ctx, frame_code, frame, out, entry, values, as_tuple=True)
    entry.graph_break = reason
    if plan.resumable:
        entry.kind = "resume"
        code = plan.emit(frame_code, runner, tx.kw_names, resume=True)
        log_breaks.info("graph break at %s: %s", reason.user_loc, reason.reason)
    else:
        entry.kind = "continue"
        try:
            code = plan.emit(frame_code, runner, tx.kw_names, resume=False)
        except ValueError as e:  # e.g. 3.11: the break sits right after a fused COMPARE_OP
            raise Unsupported(f"cannot continue in plain Python at the break: {e}") from e
        msg = f"{reason.user_loc}: the rest of the frame runs eagerly ({plan.resume_reason})"
        ctx.eager_reasons.append(msg)
        log_breaks.info("graph break at %s: %s; %s", reason.user_loc, reason.reason, msg)
    return code, runner


def _check_fn(ctx, out, frame, original):
    def active():
        return thread_state.ctx is ctx

    try:
        return out.guards.compile_for_frame(
            frame.f_globals,
            original.co_freevars,
            active,
            FrameValues(frame.f_locals, frame.f_globals, original.co_freevars),
        )
    except ValueError as e:
        raise _SegmentPath(str(e)) from e
