"""The segment path entered through the C frame hook (``eval_frame``): every user frame
started inside a compiled region — including frames started by library code (module hooks,
autograd Functions, callbacks) — runs through capture. The bytecode path's fallback enters
the segment path here too.

On a cache miss the hook calls ``callback``; for user code it answers a *trampoline*: a code
object with the original's argument layout, cells and free variables that calls
``_enter(original_code, args, closure)``, which runs the frame's segments
(``runner.run_state``). Segment guards stay in the segment cache, so the C entry's
check function accepts everything.
"""

from __future__ import annotations

import inspect
import threading
import types

from .. import eval_frame as ef
from ..bytecode import Positions, create_instruction, make_code
from ..bytecode import builders as b
from ..capture.eager_step import FrameState
from ..capture.frame_codegen import RESUME_OF, arg_names
from ..capture.runtime_values import NULL
from ..capture_context import current_context, wants_frame
from .runner import run_state

_tls = threading.local()
_trampolines: dict = {}
_ARG_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _accept(f_locals) -> bool:
    return True


def trampoline(code: types.CodeType) -> types.CodeType:
    hit = _trampolines.get(code)
    if hit is not None:
        return hit
    names = arg_names(code)
    cells = set(code.co_cellvars)
    loads = [b.load_deref(n) if n in cells else b.load_local(n) for n in names]
    body = [
        *b.call(
            b.load_const(_enter),
            [
                b.load_const(code),
                [*[i for x in loads for i in x], *b.build_tuple(len(names))],
                [
                    *[create_instruction("LOAD_CLOSURE", argval=f) for f in code.co_freevars],
                    *b.build_tuple(len(code.co_freevars)),
                ],
            ],
        ),
        *b.return_value(),
    ]
    here = Positions(code.co_firstlineno, code.co_firstlineno, 0, 0)
    for inst in body:  # a location for tracebacks that pass through the trampoline
        inst.positions = here
    new = make_code(
        body,
        name=code.co_name,
        qualname=code.co_qualname,
        argnames=names,
        cellvars=code.co_cellvars,
        freevars=code.co_freevars,
        filename=code.co_filename,
        firstlineno=code.co_firstlineno,
    )
    flags = new.co_flags & ~_ARG_FLAGS | (code.co_flags & _ARG_FLAGS)
    new = new.replace(
        co_argcount=code.co_argcount,
        co_posonlyargcount=code.co_posonlyargcount,
        co_kwonlyargcount=code.co_kwonlyargcount,
        co_flags=flags,
    )
    ef.check_transformed_code(code, new)
    ef.mark_skip(new)
    _trampolines[code] = new
    return new


def _enter(code, args, closure):
    ctx = current_context()
    names = arg_names(code)
    L = dict(zip(names, args))
    resume = RESUME_OF.get(code)
    if resume is not None:
        return _enter_resume(ctx, code, resume, L, closure or ())
    cells = {}
    for n in code.co_cellvars:  # arguments that are cells arrive as their values
        if n in L:
            cells[n] = types.CellType(L.pop(n))
    g = _tls.globals_by_code.get(code) if hasattr(_tls, "globals_by_code") else None
    fn = types.FunctionType(code, g if g is not None else {}, code.co_name, None, closure or None)
    fs = FrameState(code, fn, L, fn.__globals__, closure or (), cells, [], None, 0)
    fs.entry = None  # arguments are already bound: an eager fallback calls _call_original
    return run_state(ctx, fs)


def _enter_resume(ctx, code, resume, L, closure):
    """A resume function of the bytecode path, run as segments of its *original* code from
    the offset it resumes at (its stack arguments become the frame's value stack)."""
    original, offset, layout = resume
    stack = [NULL if null else L.pop(f"___stack{i}") for i, null in enumerate(layout)]
    n_own = len(original.co_cellvars)
    cells = dict(zip(original.co_cellvars, closure[:n_own]))
    outer = tuple(closure[n_own:])
    g = _tls.globals_by_code.get(code) if hasattr(_tls, "globals_by_code") else None
    fn = types.FunctionType(original, g if g is not None else {}, original.co_name, None, outer)
    fs = FrameState(original, fn, L, fn.__globals__, outer, cells, stack, None, offset)
    fs.entry = None
    return run_state(ctx, fs)


def callback(frame, cache_size):
    code = frame.f_code
    if not wants_frame(frame):
        ef.mark_skip(code)
        return None
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        ef.mark_skip(code)
        return None
    if not hasattr(_tls, "globals_by_code"):
        _tls.globals_by_code = {}
    _tls.globals_by_code[code] = frame.f_globals
    return ef.GuardedCode(trampoline(code), _accept)
