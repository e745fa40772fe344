"""Resume functions checked against real executions.

For sample functions, a run under opcode tracing records a deep copy of the locals each time
execution reaches an instruction where the value stack is empty. For each such point, the
resume function built with `make_resume_code` (arguments: the locals that `live_locals_at`
says are live and that are bound there) must produce the same outcome as the original call.
"""

from __future__ import annotations

import copy
import fractions
import sys
import textwrap
import types

import pytest
from test_bytecode_behaviour import (
    loops_and_branches,
    many_locals_and_kwargs,
    match_statement,
    try_except_finally,
    with_blocks,
)

from danlu_dynamo.bytecode import (
    disassemble,
    live_locals,
    make_function,
    make_resume_code,
    stack_depths,
)


def _outcome(fn, args, kwargs=None):
    try:
        return ("ok", fn(*args, **(kwargs or {})))
    except Exception as e:
        return ("raised", type(e).__name__, str(e))


def _snapshots(fn, args, kwargs, offsets):
    """Run fn, recording a deep copy of its locals the first time each offset is reached."""
    code = fn.__code__
    seen: dict[int, dict] = {}

    def record(frame, offset):
        if frame.f_code is code and offset in offsets and offset not in seen:
            try:
                seen[offset] = copy.deepcopy(dict(frame.f_locals))
            except Exception:
                seen[offset] = None  # not copyable: skip this point

    if sys.version_info >= (3, 12):
        # 3.12.1 ignores f_trace_opcodes set from a trace function; use sys.monitoring.
        mon = sys.monitoring
        tool = next(t for t in range(6) if mon.get_tool(t) is None)
        mon.use_tool_id(tool, "danlu-test")
        mon.register_callback(
            tool, mon.events.INSTRUCTION, lambda c, off: record(sys._getframe(1), off)
        )
        mon.set_local_events(tool, code, mon.events.INSTRUCTION)
        try:
            outcome = _outcome(fn, args, kwargs)
        finally:
            mon.set_local_events(tool, code, 0)
            mon.register_callback(tool, mon.events.INSTRUCTION, None)
            mon.free_tool_id(tool)
        return outcome, seen

    def local_tracer(frame, event, arg):
        if event == "opcode":
            record(frame, frame.f_lasti)
        return local_tracer

    def tracer(frame, event, arg):
        if frame.f_code is code:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return local_tracer
        return None

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        outcome = _outcome(fn, args, kwargs)
    finally:
        sys.settrace(old)
    return outcome, seen


def _check_resume_points(fn, args, kwargs=None):
    code = fn.__code__
    assert not code.co_cellvars and not code.co_freevars, "closures need the original cells"
    instructions = disassemble(code)
    depths = stack_depths(instructions)
    live = live_locals(instructions)
    first_resume = next(i for i, ins in enumerate(instructions) if ins.opname == "RESUME")
    candidates = {
        ins.offset: (ins, names)
        for i, (ins, d, names) in enumerate(zip(instructions, depths, live))
        if d == 0 and i > first_resume
    }
    expected, snaps = _snapshots(fn, args, kwargs, set(candidates))
    checked = 0
    for offset, values in snaps.items():
        if values is None:
            continue
        _, names = candidates[offset]
        passed = [n for n in code.co_varnames if n in names and n in values]
        rc = make_resume_code(code, offset, live_locals=passed)
        resumed = make_function(rc, fn.__globals__)
        got = _outcome(resumed, [copy.deepcopy(values[n]) for n in passed])
        assert got == expected, (fn.__qualname__, offset, passed)
        checked += 1
    return checked


CASES = [
    (loops_and_branches, (20,), None),
    (loops_and_branches, (3,), None),
    (try_except_finally, ([1, 2, 0, "x", 5],), None),
    (try_except_finally, ([0, 1, 1, 0, 3],), None),
    (with_blocks, (2,), None),
    (with_blocks, (0,), None),
    (match_statement, ([1, 2, 3],), None),
    (match_statement, ({"go": "s"},), None),
    (many_locals_and_kwargs, (1, 5, 6, 7), {"c": 0, "z": 9}),
    (textwrap.dedent, ("    a\n      b\n\n    c\n",), None),
    (textwrap.TextWrapper(width=12)._wrap_chunks.__func__, None, None),
    (fractions.Fraction.limit_denominator, (fractions.Fraction(314159, 100000), 50), None),
]


def _ids(case):
    return f"{case[0].__qualname__}{len(str(case[1]))}"


@pytest.mark.parametrize("fn,args,kwargs", CASES, ids=[_ids(c) for c in CASES])
def test_resume_at_every_empty_stack_point(fn, args, kwargs):
    if args is None:  # a bound method: wrap its function with the instance
        wrapper = textwrap.TextWrapper(width=12)
        args = (wrapper, wrapper._split_chunks("The quick brown fox jumps over the lazy dog"))
    checked = _check_resume_points(fn, args, kwargs)
    assert checked >= 2


def test_resume_points_are_many_in_total():
    total = 0
    for fn, args, kwargs in CASES:
        if args is None:
            wrapper = textwrap.TextWrapper(width=12)
            args = (wrapper, wrapper._split_chunks("The quick brown fox jumps over the lazy dog"))
        total += _check_resume_points(fn, args, kwargs)
    print(f"resume points checked: {total}")
    assert total > 80


def _unbound_path(flag):
    if flag:
        value = 10
    result = [1]
    result.append(value)  # UnboundLocalError when flag is false
    return result


def test_resume_reproduces_unbound_local_errors():
    assert _check_resume_points(_unbound_path, (False,), None) >= 2
    assert _check_resume_points(_unbound_path, (True,), None) >= 2


def test_live_locals_exclude_dead_values():
    def f(a, b):
        c = a + 1
        a = 5  # the old `a` is dead from here
        return c + a + b

    ins = disassemble(f.__code__)
    live = live_locals(ins)
    store_a = [i for i, x in enumerate(ins) if x.opname == "STORE_FAST" and x.argval == "a"][0]
    assert "a" not in live[store_a] and {"b", "c"} <= live[store_a]
    first_load = next(i for i, x in enumerate(ins) if x.opname.startswith("LOAD_FAST"))
    assert {"a", "b"} <= live[first_load] and "c" not in live[first_load]


def _three_steps(a, *rest, scale=2, **extra):
    b = a * scale
    c = b + len(rest) + len(extra)

    def show():
        return (a, b, c)

    return show(), sorted(extra)


def test_continuation_code_keeps_the_signature_and_skips_ahead():
    """Transformed code with the original signature: the prefix computes `b` itself (as a
    compiled graph would) and execution continues at `c = ...` in the original code."""
    from danlu_dynamo.bytecode import builders as b
    from danlu_dynamo.bytecode import create_instruction, make_continuation_code

    code = _three_steps.__code__
    ins = disassemble(code)
    line_c = code.co_firstlineno + 2
    start_c = next(i for i in ins if i.positions.lineno == line_c)
    # b = a * scale * 10 (deliberately different, to see that the prefix ran)
    prefix = b.load_deref("a") + b.load_local("scale") + [create_instruction("BINARY_OP", arg=5)]
    prefix += b.load_const(10) + [create_instruction("BINARY_OP", arg=5)]
    prefix += [create_instruction("STORE_DEREF", argval="b")]
    new = make_continuation_code(code, start_c.offset, prefix=prefix)
    assert new.co_varnames[: code.co_argcount] == code.co_varnames[: code.co_argcount]
    assert (new.co_cellvars, new.co_freevars) == (code.co_cellvars, code.co_freevars)
    assert new.co_flags == code.co_flags
    from danlu_dynamo.eval_frame import check_transformed_code

    check_transformed_code(_three_steps.__code__, new)  # the frame hook accepts it
    fn = types.FunctionType(new, _three_steps.__globals__, "t", None, None)
    fn.__kwdefaults__ = _three_steps.__kwdefaults__
    assert fn(3, 1, 2, z=0) == ((3, 60, 63), ["z"])
    assert fn(1) == ((1, 20, 20), [])
    # Continuing at the very first statement with an empty prefix is the original function.
    first = next(i for i in ins if i.positions.lineno == code.co_firstlineno + 1)
    same = types.FunctionType(
        make_continuation_code(code, first.offset), _three_steps.__globals__, "t", None, None
    )
    same.__kwdefaults__ = _three_steps.__kwdefaults__
    assert same(3, 1, 2, z=0) == _three_steps(3, 1, 2, z=0)
