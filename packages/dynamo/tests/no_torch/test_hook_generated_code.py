"""The code the capture path emits (capture/frame_codegen.py), run through the frame hook on
every supported Python version without torch: the runner is written by hand here (it stands in
for "compiled graph + rebuild"), everything else is what capture uses — the transformed code at
a graph break, the copied break instruction, the resume functions, and the hook compiling those
in turn."""

from __future__ import annotations

import dis
import sys

import pytest
from hook_support import clean_state

from danlu_dynamo import eval_frame as ef
from danlu_dynamo.capture.frame_codegen import RESUME_OF, BreakPlan, whole_frame_code

PY313 = sys.version_info >= (3, 13)


@pytest.fixture(autouse=True)
def _clean():
    clean_state()
    yield
    clean_state()


def untraced(v):
    untraced.calls += 1
    return v * 10


untraced.calls = 0


def at_call(a, b):
    c = a + b
    d = untraced(c)  # the "unsupported" call: runs in plain Python
    return d * 2 + c


def at_branch(a, b):
    c = a - b
    if c > 0:  # a "data-dependent" branch
        return c * 3
    return c - 100


def _offset(code, opname, nth=0):
    found = [i.offset for i in dis.get_instructions(code) if i.opname.startswith(opname)]
    return found[nth]


def _callback(plans, runners, finals, emitted):
    """Answers the original with its break plan and resume functions with whole-frame code."""

    def callback(frame, cache_size):
        code = frame.f_code
        if code in plans:
            plan = plans[code]
            new = plan.emit(code, runners[code], None, resume=plan.resumable)
        elif code in RESUME_OF:
            original, offset, n_stack = RESUME_OF[code]
            new = whole_frame_code(code, original, finals[(original, offset)])
        else:
            return None
        emitted.append(code.co_name)
        return ef.GuardedCode(new, lambda L: True)

    return callback


def test_break_at_a_call_resumes_after_it():
    code = at_call.__code__
    # the stack at the CALL: the callable and its NULL slot (order depends on the version), c
    nulls = [False, True, False] if PY313 else [True, False, False]
    plan = BreakPlan(code, _offset(code, "CALL"), nulls, {"a", "b", "c"})
    assert plan.resumable and plan.stored_locals == ["c"] and plan.resume_locals == ["c"]

    def runner(a, b):  # stands in for the graph: non-NULL stack values, then stored locals
        c = a + b
        return (untraced, c, c)

    after = plan.successor.offset
    finals = {(code, after): lambda stack0, c: stack0 * 2 + c}
    emitted = []
    untraced.calls = 0
    cb = _callback({code: plan}, {code: runner}, finals, emitted)
    region = ef.compiled_region(at_call, cb)
    for a in range(3):
        assert region(a, 5) == at_call(a, 5)
    assert untraced.calls == 6  # the break instruction ran for real each time
    assert emitted == ["at_call", f"__resume_at_call_at_{after}"]


def test_break_at_a_branch_resumes_on_either_side():
    code = at_branch.__code__
    jump = next(i for i in dis.get_instructions(code) if i.opname.startswith("POP_JUMP"))
    plan = BreakPlan(code, jump.offset, [False], {"a", "b", "c"})
    assert plan.resumable and plan.branch is not None

    def runner(a, b):  # the condition on the stack, then c
        c = a - b
        return (c > 0, c)

    succ = plan.successor.offset
    taken = plan.instr.target.offset
    sides = {succ: None, taken: None}
    # which resume offset is "c > 0" depends on the jump's sense; find it from the plan
    true_side = taken if plan.branch == (True, "if") else succ
    for off in sides:
        sides[off] = (lambda c: c * 3) if off == true_side else (lambda c: c - 100)
    finals = {(code, off): fn for off, fn in sides.items()}
    emitted = []
    region = ef.compiled_region(at_branch, _callback({code: plan}, {code: runner}, finals, emitted))
    for a, b in ((5, 1), (1, 5), (7, 2), (0, 3)):
        assert region(a, b) == at_branch(a, b)
    assert sorted(emitted[1:]) == sorted(f"__resume_at_branch_at_{o}" for o in sides)


def test_continuing_in_plain_python_from_the_break():
    code = at_call.__code__
    nulls = [False, True, False] if PY313 else [True, False, False]
    plan = BreakPlan(code, _offset(code, "CALL"), nulls, {"a", "b", "c"})

    def runner(a, b):
        c = a + b
        return (untraced, c, c)

    region = ef.compiled_region(at_call, lambda frame, n: _continue(frame, plan, runner))
    for a in range(3):
        assert region(a, 4) == at_call(a, 4)


def _continue(frame, plan, runner):
    if frame.f_code is not plan.original:
        return None
    return ef.GuardedCode(plan.emit(frame.f_code, runner, None, resume=False), lambda L: True)


def test_closure_cells_reach_the_runner_and_the_resume_function():
    k = 7

    def with_closure(a):
        c = a * k
        d = untraced(c)
        return d + k + c

    code = with_closure.__code__
    nulls = [False, True, False] if PY313 else [True, False, False]
    plan = BreakPlan(code, _offset(code, "CALL"), nulls, {"a", "c"})

    def runner(a, cells):
        assert cells[0].cell_contents == k  # the frame's closure, as cell objects
        c = a * cells[0].cell_contents
        return (untraced, c, c)

    after = plan.successor.offset

    def final(stack0, c, cells):
        return stack0 + cells[0].cell_contents + c

    emitted = []
    cb = _callback({code: plan}, {code: runner}, {(code, after): final}, emitted)
    region = ef.compiled_region(with_closure, cb)
    for a in range(3):
        assert region(a) == with_closure(a)


def add(p, q):
    return p + q


def call_in_progress(a):
    return add(a, untraced(a)) * 3


def test_break_inside_a_call_in_progress_keeps_its_null_slot():
    code = call_in_progress.__code__
    call = _offset(code, "CALL")  # the first CALL is untraced(a)'s
    pair = [False, True] if PY313 else [True, False]
    # stack: add's callable + NULL slot, a, then untraced's callable + NULL slot, a
    plan = BreakPlan(code, call, pair + [False] + pair + [False], {"a"})
    assert plan.resumable and plan.n_below == 3 and None in plan.resume_stack

    def runner(a):
        return (add, a, untraced, a)  # the non-NULL stack values; no local lives on

    def final(*args):  # the resume function's stack: add, a, untraced(a) (NULL not passed)
        f, a, u = args
        return f(a, u) * 3

    emitted = []
    cb = _callback({code: plan}, {code: runner}, {(code, plan.successor.offset): final}, emitted)
    region = ef.compiled_region(call_in_progress, cb)
    for a in range(3):
        assert region(a) == call_in_progress(a)
    assert len(emitted) == 2


def branch_in_loop(a, n):
    c = 0
    for i in range(n):
        c = a - i
        if c > 0:  # a "data-dependent" branch inside a loop
            a = a - 1
        else:
            a = a * 2 + 1
    return a + c


def _deep(depth, fn, *args):
    return fn(*args) if depth == 0 else _deep(depth - 1, fn, *args)


def test_branch_inside_a_loop_resumes_or_continues_when_deep():
    from danlu_dynamo.capture.frame_codegen import MAX_RESUME_NESTING

    code = branch_in_loop.__code__
    jump = next(i for i in dis.get_instructions(code) if i.opname.startswith("POP_JUMP"))
    plan = BreakPlan(code, jump.offset, [False, False], {"a", "n", "i", "c"})
    assert plan.resumable and plan.branch is not None

    def runner(a, n):  # up to the first branch: the iterator and the condition, then locals
        it = iter(range(n))
        i = next(it)
        c = a - i
        values = {"a": a, "n": n, "i": i, "c": c}
        return (it, c > 0, *[values[k] for k in plan.stored_locals])

    emitted = []

    def callback(frame, cache_size):  # resume functions run as they are (plain Python)
        if frame.f_code is not code:
            if frame.f_code in RESUME_OF:
                emitted.append(frame.f_code.co_name)
            return None
        return ef.GuardedCode(plan.emit(code, runner, None, resume=True), lambda L: True)

    region = ef.compiled_region(branch_in_loop, callback)
    cases = [(5, 3), (1, 4), (3, 6), (0, 2)]
    for a, n in cases:
        assert region(a, n) == branch_in_loop(a, n)
    assert emitted and all(name.startswith("__resume_branch_in_loop_at_") for name in emitted)
    emitted.clear()
    for a, n in cases:  # deep: the branch is taken in place and the loop goes on there
        assert _deep(MAX_RESUME_NESTING + 5, region, a, n) == branch_in_loop(a, n)
    assert not emitted
