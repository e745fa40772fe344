"""disassemble -> assemble with no edit reproduces stdlib code objects byte for byte."""

from __future__ import annotations

import dis

import pytest
from bytecode_samples import STDLIB_MODULES, module_code_objects, walk_code

from danlu_dynamo.bytecode import PY_VERSION, assemble, disassemble
from danlu_dynamo.bytecode.exception_table import encode_exception_table, parse_exception_table


def _mismatches(code):
    new = assemble(disassemble(code), template=code)
    problems = []
    if new.co_code != code.co_code:
        problems.append("co_code")
    if new.co_exceptiontable != code.co_exceptiontable:
        problems.append("co_exceptiontable")
    if parse_exception_table(new.co_exceptiontable) != parse_exception_table(
        code.co_exceptiontable
    ):
        problems.append("exception entries")
    if new.co_linetable != code.co_linetable:
        problems.append("co_linetable")
    if list(new.co_positions()) != list(code.co_positions()):
        problems.append("co_positions")
    if list(new.co_lines()) != list(code.co_lines()):
        problems.append("co_lines")
    if new.co_stacksize != code.co_stacksize:
        problems.append(f"co_stacksize {new.co_stacksize} != {code.co_stacksize}")
    if new.co_consts != code.co_consts or new.co_names != code.co_names:
        problems.append("tables")
    return problems


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_stdlib_module_round_trips_exactly(module):
    codes = module_code_objects(module)
    assert codes, f"no source code objects for {module}"
    failures = {}
    for code in codes:
        problems = _mismatches(code)
        if problems:
            failures[f"{code.co_qualname}:{code.co_firstlineno}"] = problems
    assert not failures, f"{len(failures)}/{len(codes)} code objects differ: {failures}"


def test_sample_is_large():
    total = sum(len(module_code_objects(m)) for m in STDLIB_MODULES)
    print(f"stdlib code objects in the round-trip sample: {total}")
    assert total > 5000


def test_exception_table_codec_round_trips():
    def f(x):
        try:
            with open(x) as fh:
                return fh.read()
        except OSError as e:
            return str(e)
        finally:
            x = None

    raw = parse_exception_table(f.__code__.co_exceptiontable)
    assert raw, "expected a non-empty exception table"
    assert encode_exception_table(raw) == f.__code__.co_exceptiontable
    # Large values need several 6-bit chunks.
    big = [type(raw[0])(2, 2 + 2 * 5000, 2 * 70000, 300, True)]
    assert parse_exception_table(encode_exception_table(big)) == big


DIS_CHECK_MODULES = ["argparse", "json.decoder", "re._parser", "string", "dataclasses", "enum"]


def test_disassembly_matches_dis_instruction_stream():
    """Our instruction list is dis's minus EXTENDED_ARG: same opcodes, opargs, argvals,
    positions; jump targets are the instructions at dis's target offsets."""
    checked_jumps = 0
    for code in [c for m in DIS_CHECK_MODULES for c in module_code_objects(m)]:
        ours = disassemble(code)
        raw = list(dis.get_instructions(code))
        theirs = [i for i in raw if i.opname != "EXTENDED_ARG"]
        assert [(i.opname, i.arg, i.offset) for i in ours] == [
            (i.opname, i.arg, i.offset) for i in theirs
        ]
        # An offset inside an EXTENDED_ARG prefix belongs to the instruction it extends.
        owner = {}
        pending = []
        for i in raw:
            pending.append(i.offset)
            if i.opname != "EXTENDED_ARG":
                owner.update(dict.fromkeys(pending, i.offset))
                pending = []
        for mine, ref in zip(ours, theirs):
            assert tuple(mine.positions) == tuple(ref.positions)
            assert (mine.target is not None) == (ref.opcode in dis.hasjrel + dis.hasjabs)
            if mine.target is not None:
                assert mine.target.offset == owner[ref.argval]
                checked_jumps += 1
            elif ref.opname == "KW_NAMES" and PY_VERSION == (3, 11):
                assert mine.argval == code.co_consts[ref.arg]  # dis shows the index
            else:
                assert mine.argval == ref.argval or (mine.argval != mine.argval), (mine, ref)
    assert checked_jumps > 500


_SAME_NAME_TWO_SLOTS = """
class Outer:
    def method(self):
        class X:
            x = __class__
            def f():
                __class__
        return X.x
"""

_TYPE_PARAM_SCOPES = """
type Alias[T: ([T for T in (T, [1])[1]], T)] = [T for T in T.__name__]
def get():
    T, = Alias.__type_params__
    return Alias.__value__, T.__constraints__[0]
"""


def test_names_with_two_slots_keep_their_slot():
    """A name can be a local or cell *and* a free variable (class bodies using __class__,
    type-parameter scopes); each instruction must keep the slot it used."""
    from bytecode_edit_helpers import transform_code

    sources = [_SAME_NAME_TWO_SLOTS] + ([_TYPE_PARAM_SCOPES] if PY_VERSION >= (3, 12) else [])
    for source in sources:
        top = compile(source, "<two-slots>", "exec")
        for code in walk_code(top):
            assert _mismatches(code) == [], code.co_qualname
        original_ns: dict = {}
        exec(top, original_ns)
        edited_ns: dict = {}
        exec(transform_code(top), edited_ns)
        if "Outer" in original_ns:
            assert edited_ns["Outer"]().method() is edited_ns["Outer"]
            assert original_ns["Outer"]().method() is original_ns["Outer"]
        else:
            assert repr(edited_ns["get"]()) == repr(original_ns["get"]())
