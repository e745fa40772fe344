"""Editing helpers: clone, replace, redirect, protect; resume-function safety checks."""

from __future__ import annotations

import pytest

from danlu_dynamo.bytecode import (
    PY_VERSION,
    assemble,
    clone_instructions,
    create_instruction,
    disassemble,
    make_code,
    make_function,
    make_resume_code,
    protect,
    redirect_jumps,
    replace_instructions,
)
from danlu_dynamo.bytecode import builders as b
from danlu_dynamo.bytecode.opcodes import FUSED_WITH_NEXT

GLOBALS = {"__builtins__": __builtins__}


def _classify(xs):
    out = []
    for x in xs:
        try:
            out.append(100 // x if x > 0 else "neg")
        except ZeroDivisionError:
            out.append("zero")
    return out


def test_clone_is_independent_and_assembles_the_same():
    code = _classify.__code__
    original = disassemble(code)
    copy = clone_instructions(original)
    assert all(a is not c for a, c in zip(original, copy))
    ids = {id(i) for i in copy}
    assert all(id(i.target) in ids for i in copy if i.target is not None)
    assert all(id(i.exn_entry.target) in ids for i in copy if i.exn_entry is not None)
    assert not {id(i.exn_entry) for i in copy if i.exn_entry} & {
        id(i.exn_entry) for i in original if i.exn_entry
    }
    assert assemble(copy, template=code).co_code == code.co_code
    # Editing the copy leaves the original list usable.
    copy.insert(1, create_instruction("NOP"))
    assert assemble(original, template=code).co_code == code.co_code


def test_replace_instructions_keeps_jumps_and_handlers():
    """Replace every `100 // x` BINARY_OP by (NOP, BINARY_OP): targets and handler move along."""
    code = _classify.__code__
    ins = disassemble(code)
    division = [i for i in ins if i.opname == "BINARY_OP" and i.argval == 2]  # NB_FLOOR_DIVIDE
    assert division and division[0].exn_entry is not None
    # Also make something jump to it: the replacement's first instruction must receive it.
    replacements = {
        id(d): [create_instruction("NOP"), create_instruction("BINARY_OP", arg=d.arg)]
        for d in division
    }
    replace_instructions(ins, replacements)
    new_ops = [i for i in ins if i.opname == "BINARY_OP" and i.arg == 2]
    assert all(i.exn_entry is not None for i in new_ops)  # inherited the try block
    fn = make_function(assemble(ins, template=code), _classify.__globals__)
    for xs in ([5, 0, -1, 3], [], [0, 0]):
        assert fn(xs) == _classify(xs)


def test_redirect_jumps():
    # def f(n): i = 0; while i < n: i += 1 (loop head at `head`); return i
    head = create_instruction("LOAD_FAST", argval="i")
    done = create_instruction("LOAD_FAST", argval="i")
    body = (
        b.load_const(0)
        + b.store_local("i")
        + [head]
        + b.load_local("n")
        + [create_instruction("COMPARE_OP", argval="<")]
        + [create_instruction("POP_JUMP_IF_FALSE", target=done)]
        + b.load_local("i")
        + b.load_const(1)
        + [create_instruction("BINARY_OP", arg=13)]
        + b.store_local("i")
        + b.jump_to(head)
        + [done]
        + b.return_value()
    )
    # Put a counter bump before the loop head and route the back edge through it.
    bump = b.load_local("i") + b.load_const(10) + [create_instruction("BINARY_OP", arg=13)]
    bump += b.store_local("i")
    k = body.index(head)
    body[k:k] = bump
    assert redirect_jumps(body, head, bump[0]) == 1
    f = make_function(make_code(body, name="f", argnames=["n"]), GLOBALS)
    # i goes 0 -> +10 -> +1 +10 -> ... while i < n
    expected = []
    for n in range(0, 40, 7):
        i = 0
        i += 10
        while i < n:
            i += 1
            i += 10
        expected.append(i)
    assert [f(n) for n in range(0, 40, 7)] == expected


def test_protect_builds_a_try_except_from_scratch():
    """def f(x): try: return 10 // x  except: return "caught" (built instruction by instruction)."""
    handler = create_instruction("PUSH_EXC_INFO")
    body = b.load_const(10) + b.load_local("x") + [create_instruction("BINARY_OP", arg=2)]
    body += b.return_value()
    protected = list(body)
    handler_code = [handler, *b.pop_top(), create_instruction("POP_EXCEPT")]
    handler_code += b.return_const("caught")
    protect(protected, handler, depth=0)
    f = make_function(make_code(body + handler_code, name="f", argnames=["x"]), GLOBALS)
    assert f(5) == 2
    assert f(0) == "caught"
    assert f(-3) == -4
    assert f.__code__.co_exceptiontable  # an entry was written
    with pytest.raises(ValueError):
        protect([], handler, depth=0)


# One source line, so that 3.13 fuses `STORE_FAST a; LOAD_FAST fn` into STORE_FAST_LOAD_FAST.
_SOURCE = (
    "def _store_then_load(xs, k):\n    fn = abs\n    for a in xs: k = fn(a) + k\n    return k\n"
)
_namespace: dict = {}
exec(compile(_SOURCE, "<store-then-load>", "exec"), _namespace)
_store_then_load = _namespace["_store_then_load"]


def test_resume_checks_loads_of_locals_not_passed():
    """3.13 STORE_FAST_LOAD_FAST / 3.12+ LOAD_FAST of a local that is not passed in must raise
    UnboundLocalError (never read an empty slot)."""
    code = _store_then_load.__code__
    ins = disassemble(code)
    loop_start = next(i for i in ins if i.opname.startswith("LOAD_FAST") and i.argval == "xs")
    if PY_VERSION >= (3, 13):
        assert any(i.opname == "STORE_FAST_LOAD_FAST" for i in ins)
    good = make_resume_code(code, loop_start.offset, live_locals=["xs", "k", "fn"])
    assert make_function(good, GLOBALS)([1, -2], 3, abs) == 6
    bad = make_resume_code(code, loop_start.offset, live_locals=["xs", "k"])
    with pytest.raises(UnboundLocalError):
        make_function(bad, GLOBALS)([1, 2], 3)


def test_resume_refuses_to_split_a_fused_pair():
    def has_pairs(x):
        for _ in x:
            pass  # 3.13: END_FOR + POP_TOP
        return sorted(x, reverse=True)  # 3.11: KW_NAMES + PRECALL + CALL; 3.12: KW_NAMES + CALL

    ins = disassemble(has_pairs.__code__)
    fused = [(a, c) for a, c in zip(ins, ins[1:]) if a.opname in FUSED_WITH_NEXT]
    assert fused, f"expected a fused pair on {PY_VERSION}"
    for _, second in fused:
        with pytest.raises(ValueError, match="fused"):
            make_resume_code(has_pairs.__code__, second.offset, stack=["a", "b", "c", "d"])


def test_code_tables_lookups():
    from danlu_dynamo.bytecode import CodeTables

    def f():
        x = 0.0
        y = 7
        z = "s"
        return x, y, z

    tables = CodeTables.from_code(f.__code__)
    n = len(tables.consts)
    assert tables.consts[tables.const_index(7)] == 7
    assert tables.consts[tables.const_index("s")] == "s"
    zero = tables.consts.index(0.0)
    minus_zero = tables.const_index(-0.0)  # equal to 0.0 but not the same constant
    assert minus_zero != zero and str(tables.consts[minus_zero]) == "-0.0"
    assert tables.consts[tables.const_index(True)] is True  # not merged with 1
    assert type(tables.consts[tables.const_index(1)]) is int
    # Edited in place (same length): lookups still answer correctly.
    k = tables.consts.index(7)
    tables.consts[k] = 8
    assert tables.consts[tables.const_index(8)] == 8
    assert tables.consts[tables.const_index(7)] == 7
    assert len(tables.consts) == n + 4  # -0.0, True, 1, and 7 again
    tables.names[:] = ["a", "b"]
    assert tables.name_index("b") == 1
    tables.names[1] = "c"
    assert tables.names[tables.name_index("c")] == "c"
    assert tables.local_index("new_local") == len(tables.varnames) - 1
