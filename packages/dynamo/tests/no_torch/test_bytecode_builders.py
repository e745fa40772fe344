"""Code built from scratch with the helpers, resume functions, printing, and clear errors."""

from __future__ import annotations

import random
import types

import pytest

from danlu_dynamo.bytecode import (
    PY_VERSION,
    AssemblyError,
    StackDepthError,
    assemble,
    create_instruction,
    disassemble,
    format_instructions,
    make_code,
    make_function,
    make_resume_code,
    resume_closure_names,
)
from danlu_dynamo.bytecode import builders as b

GLOBALS = {"__builtins__": __builtins__}


def test_call_unpack_store_return():
    # def f(a, n): q, r = divmod(a, n); return sorted([q, r, a], reverse=True), q
    body = (
        b.call(b.load_global("divmod"), [b.load_local("a"), b.load_local("n")])
        + b.unpack_to_locals(["q", "r"])
        + b.call(
            b.load_global("sorted"),
            [b.load_local("q") + b.load_local("r") + b.load_local("a") + b.build_list(3)],
            {"reverse": b.load_const(True)},
        )
        + b.load_local("q")
        + b.build_tuple(2)
        + b.return_value()
    )
    f = make_function(make_code(body, name="f", argnames=["a", "n"]), GLOBALS)
    rng = random.Random(0)
    for _ in range(50):
        a, n = rng.randrange(-1000, 1000), rng.choice([1, 2, 3, 7, -5, 11])
        q, r = divmod(a, n)
        assert f(a, n) == (sorted([q, r, a], reverse=True), q)
    assert f.__code__.co_varnames == ("a", "n", "q", "r")


def test_store_locals_order_rotate_and_attrs():
    # def g(x): p, s = 1, x; top = s; ...; return (x.real, p, s, rotated)
    body = (
        b.load_const(1)
        + b.load_local("x")
        + b.store_locals(["p", "s"])  # p = 1, s = x
        + b.load_const("a")
        + b.load_const("b")
        + b.load_const("c")
        + b.rotate(3)  # a b c -> c a b
        + b.build_tuple(3)
        + b.store_local("rot")
        + b.load_local("x")
        + b.load_attr("real")
        + b.load_local("p")
        + b.load_local("s")
        + b.load_local("rot")
        + b.subscr_const(0)
        + b.build_tuple(4)
        + b.return_value()
    )
    g = make_function(make_code(body, name="g", argnames=["x"]), GLOBALS)
    assert g(5 + 2j) == (5.0, 1, 5 + 2j, "c")


def test_cells_and_free_variables():
    # def outer(v): cell = v; def inner(): return cell * 2 (inner built here by hand)
    inner_code = make_code(
        b.load_deref("cell")
        + b.load_const(2)
        + [create_instruction("BINARY_OP", arg=5)]
        # 5 is NB_MULTIPLY in every supported version
        + b.return_value(),
        name="inner",
        freevars=["cell"],
    )
    inner = make_function(inner_code, GLOBALS, closure=(types.CellType(21),))
    assert inner() == 42


def test_return_const_and_loop_with_backward_jump():
    # def count(n): i = 0; while i < n: i += 3; return i   (jumps built from references)
    head = create_instruction("LOAD_FAST", argval="i")
    exit_ = create_instruction("LOAD_FAST", argval="i")
    body = (
        b.load_const(0)
        + b.store_local("i")
        + [head]
        + b.load_local("n")
        + [create_instruction("COMPARE_OP", argval="<")]
        + [create_instruction("POP_JUMP_IF_FALSE", target=exit_)]
        + b.load_local("i")
        + b.load_const(3)
        + [create_instruction("BINARY_OP", arg=13)]  # NB_INPLACE_ADD
        + b.store_local("i")
        + b.jump_to(head)
        + [exit_]
        + b.return_value()
    )
    count = make_function(make_code(body, name="count", argnames=["n"]), GLOBALS)
    assert [count(n) for n in range(8)] == [0, 3, 3, 3, 6, 6, 6, 9]
    names = [i.opname for i in disassemble(count.__code__)]
    assert "JUMP_BACKWARD" in names


def test_tail_call_of_a_resume_like_function():
    """Emitted code leaves values on the stack and tail-calls a continuation with them."""

    def continuation(s0, s1, x, y):
        return (s0, s1, x, y)

    body = (
        b.load_local("x")
        + b.load_const(10)
        + [create_instruction("BINARY_OP", arg=0)]  # NB_ADD
        + b.load_const("s1")
        + b.call_and_return(b.load_const(continuation), 2, ["x", "y"])
    )
    f = make_function(make_code(body, name="f", argnames=["x", "y"]), GLOBALS)
    assert f(1, 2) == (11, "s1", 1, 2)


# -- resume functions ---------------------------------------------------------------------------


def _loop_with_closure(x, n):
    total = 0
    scale = 3

    def inner(v):
        return v * scale

    for i in range(n):
        total += inner(i) + x
    return total, scale


def test_resume_inside_a_for_loop():
    code = _loop_with_closure.__code__
    for_iter = next(i for i in disassemble(code) if i.opname == "FOR_ITER")
    rc = make_resume_code(code, for_iter.offset, stack=["it"], live_locals=["total", "x", "inner"])
    assert resume_closure_names(code) == ("scale",)
    assert rc.co_varnames[:4] == ("it", "total", "x", "inner")
    f = make_function(rc, _loop_with_closure.__globals__, closure=(types.CellType(3),))
    for start, stop, total, x in [(2, 5, 10, 100), (0, 0, 1, 2), (7, 9, -3, 0)]:
        expected_total = total + sum(3 * i + x for i in range(start, stop))
        assert f(iter(range(start, stop)), total, x, lambda v: v * 3) == (expected_total, 3)


def _guarded_division(values, d):
    out = []
    try:
        for v in values:
            out.append(v // d)
        out.append("done")
    except ZeroDivisionError:
        out.append("caught")
    finally:
        out.append("finally")
    return out


def test_resume_inside_try_keeps_handlers():
    """Resuming inside a try block: an exception after the resume point is still caught."""
    code = _guarded_division.__code__
    for_iter = next(i for i in disassemble(code) if i.opname == "FOR_ITER")
    assert for_iter.exn_entry is not None
    rc = make_resume_code(code, for_iter.offset, stack=["it"], live_locals=["out", "d"])
    f = make_function(rc, GLOBALS)
    assert f(iter([9, 4]), [1], 2) == [1, 4, 2, "done", "finally"]
    assert f(iter([9, 4]), [], 0) == ["caught", "finally"]


def _call_site(x):
    y = x * 2
    return len([y, y + 1, x])


def test_resume_at_a_call_with_null_slot():
    """Resume right at the CALL: the stack holds callable, NULL slot and argument."""
    code = _call_site.__code__
    call = next(
        i for i in disassemble(code) if i.opname == ("PRECALL" if PY_VERSION == (3, 11) else "CALL")
    )
    callable_item = b.load_global("len")
    if PY_VERSION >= (3, 13):
        stack = [callable_item, None, "arg"]
    else:
        stack = [None, callable_item, "arg"]
    rc = make_resume_code(code, call.offset, stack=stack, live_locals=[])
    f = make_function(rc, GLOBALS)
    assert f([1, 2, 3, 4]) == 4
    assert rc.co_argcount == 1


def test_resume_leaves_unpassed_locals_unbound():
    def uses_later(a):
        b_ = a + 1
        marker = 0
        return b_ + marker

    code = uses_later.__code__
    store_marker = [i for i in disassemble(code) if i.opname == "LOAD_CONST" and i.argval == 0][-1]
    rc = make_resume_code(code, store_marker.offset, live_locals=["b_"])
    assert make_function(rc, GLOBALS)(41) == 41
    # Skip the assignment of b_: reading it must raise, never read garbage.
    rc_missing = make_resume_code(code, store_marker.offset, live_locals=[])
    with pytest.raises(UnboundLocalError):
        make_function(rc_missing, GLOBALS)()


def test_resume_rejects_bad_requests():
    code = _loop_with_closure.__code__
    with pytest.raises(ValueError, match="cell"):
        make_resume_code(code, 0, live_locals=["scale"])
    with pytest.raises(ValueError, match="no instruction"):
        make_resume_code(code, 1)

    def gen():
        yield 1

    with pytest.raises(ValueError, match="generators"):
        make_resume_code(gen.__code__, 0)


# -- printing and errors ------------------------------------------------------------------------


def test_format_instructions_shows_targets_and_handlers():
    text = format_instructions(disassemble(_guarded_division.__code__))
    assert "FOR_ITER" in text and "-> #" in text
    assert "ExceptionTable:" in text and "[exc -> #" in text
    assert ">>" in text and "H" in text
    new = b.load_const(None) + b.return_value()
    assert "LOAD_CONST" in format_instructions(new)


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown opcode"):
        create_instruction("NOT_AN_OPCODE")
    with pytest.raises(ValueError, match="needs a target"):
        create_instruction("JUMP_FORWARD")
    template = (lambda: None).__code__
    stray = create_instruction("NOP")
    with pytest.raises(AssemblyError, match="not in the list"):
        assemble([create_instruction("JUMP", target=stray)], template=template)
    with pytest.raises(StackDepthError, match="underflow"):
        assemble(b.pop_top() + b.return_const(None), template=template)
    with pytest.raises(StackDepthError, match="falls off the end"):
        assemble(b.load_const(1) + b.pop_top(), template=template)
    orphan_yield = [create_instruction("YIELD_VALUE", arg=0)] + b.return_value()
    with pytest.raises(AssemblyError, match="followed directly by RESUME"):
        assemble(b.load_const(1) + orphan_yield, template=template)


class _Recorder:
    def __init__(self, swallow=False):
        self.events = []
        self.swallow = swallow

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.events.append(("exit", kind.__name__ if kind else None))
        return self.swallow


def _with_body(ctx, xs):
    out = []
    with ctx:
        out.append("start")
        out.append(10 // xs[0])
        out.append("end")
    out.append("after")
    return out


def test_resume_reenters_a_with_block():
    """Resume in the middle of a with body: the prefix re-enters the context manager and the
    original handler calls __exit__ on normal exit and on an exception."""
    from danlu_dynamo.bytecode import stack_depths

    code = _with_body.__code__
    ins = disassemble(code)
    depths = stack_depths(ins)
    body_line = code.co_firstlineno + 4  # out.append(10 // xs[0])
    k = next(
        i for i, x in enumerate(ins) if x.positions.lineno == body_line and x.exn_entry is not None
    )
    assert depths[k] == 1  # __exit__ is on the stack inside the body
    rc = make_resume_code(
        code,
        ins[k].offset,
        stack=[b.enter_with(b.load_local("ctx"))],
        live_locals=["ctx", "xs", "out"],
    )
    f = make_function(rc, GLOBALS)

    ctx = _Recorder()
    assert f(ctx, [5], ["start"]) == ["start", 2, "end", "after"]
    assert ctx.events == ["enter", ("exit", None)]

    ctx = _Recorder(swallow=False)
    with pytest.raises(ZeroDivisionError):
        f(ctx, [0], ["start"])
    assert ctx.events == ["enter", ("exit", "ZeroDivisionError")]

    ctx = _Recorder(swallow=True)
    assert f(ctx, [0], ["start"]) == ["start", "after"]
    assert ctx.events == ["enter", ("exit", "ZeroDivisionError")]


def _cell_argument(x, n):
    def get():
        return x

    x = x + n
    return get(), x


def test_resume_with_an_argument_that_is_a_cell():
    """An argument captured by a closure is a cell: it reaches the resume function in the
    closure, not as an argument."""
    code = _cell_argument.__code__
    assert "x" in code.co_cellvars and "x" in code.co_varnames
    ins = disassemble(code)
    store = next(i for i in ins if i.opname == "STORE_DEREF")
    # Resume at `x = x + n`'s store: the stack holds the new value.
    rc = make_resume_code(code, store.offset, stack=["value"], live_locals=["get"])
    assert rc.co_freevars == resume_closure_names(code) == ("x",)
    cell = types.CellType(1)
    get = types.FunctionType(
        [c for c in code.co_consts if isinstance(c, types.CodeType)][0],
        GLOBALS,
        "get",
        None,
        (cell,),
    )
    f = make_function(rc, GLOBALS, closure=(cell,))
    assert f(42, get) == (42, 42)
    assert cell.cell_contents == 42


def test_method_call_and_truthiness_branches():
    """def f(s, items): parts = s.split(","); do { n += 1 } while items[n:]; ..."""
    # parts = s.split(",")
    body = b.load_local("s") + b.load_method("split")
    body += b.load_const(",") + b.call_function(1) + b.store_local("parts")
    # n = 0; do: n += 1 while items[n:]  -- a backward conditional jump on a non-bool value
    head = create_instruction("LOAD_FAST", argval="n")
    body += b.load_const(0) + b.store_local("n") + [head]
    body += b.load_const(1) + [create_instruction("BINARY_OP", arg=13)] + b.store_local("n")
    body += b.load_local("items") + b.load_local("n") + b.load_const(None)
    body += [create_instruction("BUILD_SLICE", arg=2), create_instruction("BINARY_SUBSCR")]
    body += b.pop_jump_if(True, head)
    # return (parts, n, "no-first" if items[0] is None else "has-first")
    is_none = create_instruction("LOAD_CONST", argval="no-first")
    done = create_instruction("BUILD_TUPLE", arg=3)
    body += b.load_local("parts") + b.load_local("n")
    body += b.load_local("items") + b.subscr_const(0) + b.pop_jump_if_none(True, is_none)
    body += b.load_const("has-first") + b.jump_to(done)
    body += [is_none, done] + b.return_value()
    f = make_function(make_code(body, name="f", argnames=["s", "items"]), GLOBALS)
    assert f("a,b,c", [1, 2, 3]) == (["a", "b", "c"], 3, "has-first")
    assert f("x", [None]) == (["x"], 1, "no-first")
    assert f("", [None, 0, 0, 0, 0]) == ([""], 5, "no-first")


def test_set_positions_shows_in_tracebacks():
    import traceback

    body = b.load_const(1) + b.load_const(0) + [create_instruction("BINARY_OP", arg=11)]
    body += b.return_value()  # 1 / 0
    from danlu_dynamo.bytecode import Positions

    b.set_positions(body, Positions(42, 42, 4, 9))
    f = make_function(make_code(body, name="f", firstlineno=40), GLOBALS)
    with pytest.raises(ZeroDivisionError) as info:
        f()
    frames = traceback.extract_tb(info.tb)
    assert frames[-1].lineno == 42
    assert (frames[-1].colno, frames[-1].end_colno) == (4, 9)


def test_make_code_with_cells_for_an_argument_and_a_local():
    """def outer(x): y = x * 2; return (lambda: x + y)() -- both x (an argument) and y are cells."""
    inner_code = make_code(
        b.load_deref("x")
        + b.load_deref("y")
        + [create_instruction("BINARY_OP", arg=0)]
        + b.return_value(),
        name="inner",
        freevars=["x", "y"],
    )
    body = b.load_deref("x") + b.load_const(2) + [create_instruction("BINARY_OP", arg=5)]
    body += [create_instruction("STORE_DEREF", argval="y")]
    body += b.push_callable(b.new_function(inner_code, ["x", "y"])) + b.call_function(0)
    body += b.return_value()
    outer = make_function(
        make_code(body, name="outer", argnames=["x"], cellvars=["x", "y"]), GLOBALS
    )
    assert outer(5) == 15
    assert outer.__code__.co_cellvars == ("x", "y")
    # Without a closure.
    answer = make_code(b.return_const(42), name="answer")
    g = make_function(make_code(b.new_function(answer) + b.return_value(), name="g"), GLOBALS)
    assert g()() == 42


def test_readme_example(capsys):
    """The example in README.md ("Bytecode layer") works as written."""

    def fn(x):
        try:
            return 10 // x
        except ZeroDivisionError:
            return None

    ins = disassemble(fn.__code__)
    assert "RESUME" in format_instructions(ins)
    new = assemble(ins, template=fn.__code__)
    assert new.co_code == fn.__code__.co_code
    resume_idx = next(i for i, x in enumerate(ins) if x.opname == "RESUME")
    ins[resume_idx + 1 : resume_idx + 1] = (
        b.call(b.load_global("print"), [b.load_const("hi")]) + b.pop_top()
    )
    fn.__code__ = assemble(ins, template=fn.__code__)
    assert (fn(2), fn(0)) == (5, None)
    assert capsys.readouterr().out == "hi\nhi\n"


def test_bad_positions_are_a_clear_error():
    from danlu_dynamo.bytecode import Positions

    body = b.return_const(None)
    b.set_positions(body, Positions(10, 9, 0, 1))
    with pytest.raises(ValueError, match="before it starts"):
        make_code(body, name="f")


def test_resume_prefix_errors_point_at_the_resumed_line():
    import traceback

    code = _with_body.__code__
    ins = disassemble(code)
    body_line = code.co_firstlineno + 4
    k = next(
        i for i, x in enumerate(ins) if x.positions.lineno == body_line and x.exn_entry is not None
    )
    rc = make_resume_code(
        code,
        ins[k].offset,
        stack=[b.enter_with(b.load_local("ctx"))],
        live_locals=["ctx", "xs", "out"],
    )
    f = make_function(rc, GLOBALS)
    with pytest.raises((AttributeError, TypeError)) as info:
        f(object(), [1], [])  # not a context manager: BEFORE_WITH fails in the prefix
    assert traceback.extract_tb(info.tb)[-1].lineno == body_line
