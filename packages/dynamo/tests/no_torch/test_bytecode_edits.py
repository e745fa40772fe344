"""Edited code (NOPs inserted, tables shifted) keeps its structure and its behaviour."""

from __future__ import annotations

import types

import pytest
from bytecode_edit_helpers import pad_with_nops, transform_code
from bytecode_samples import module_code_objects

from danlu_dynamo.bytecode import disassemble
from danlu_dynamo.bytecode.opcodes import EXTENDED_ARG


def _shape(instructions):
    """Instructions without NOPs: opname, argval, jump target and handler as indices into the
    NOP-free list (a reference to a NOP counts as the next non-NOP), positions."""
    kept = [i for i in instructions if i.opname != "NOP"]
    next_real = {}
    k = len(kept)
    for ins in reversed(instructions):
        if ins.opname != "NOP":
            k -= 1
        next_real[id(ins)] = k
    shape = []
    for ins in kept:
        entry = ins.exn_entry
        argval = ins.argval
        if isinstance(argval, types.CodeType):
            argval = ("code", argval.co_qualname, argval.co_firstlineno)
        shape.append(
            (
                ins.opname,
                None if ins.target is not None else repr(argval),
                next_real[id(ins.target)] if ins.target is not None else None,
                (next_real[id(entry.target)], entry.depth, entry.lasti) if entry else None,
                ins.positions,
            )
        )
    return shape


@pytest.mark.parametrize("module", ["textwrap", "json.decoder", "difflib", "contextlib", "ast"])
def test_nop_padding_keeps_structure(module):
    """Pad with NOPs (jumps get EXTENDED_ARG), assemble, disassemble again: apart from the
    NOPs, same instructions, jump targets, handlers and positions; same stack size."""
    saw_extended = False
    for code in module_code_objects(module):
        padded = transform_code(code, pad_with_nops)
        saw_extended |= EXTENDED_ARG in padded.co_code[::2]
        assert _shape(disassemble(padded)) == _shape(disassemble(code)), code.co_qualname
        assert padded.co_stacksize == code.co_stacksize
    assert saw_extended


@pytest.mark.parametrize("module", ["textwrap", "json.encoder", "argparse"])
def test_shifted_tables_keep_structure(module):
    """300 unused constants and names in front: every index moves and needs EXTENDED_ARG."""
    for code in module_code_objects(module):
        shifted = transform_code(code, pad_tables=300)
        assert _shape(disassemble(shifted)) == _shape(disassemble(code)), code.co_qualname
        if code.co_names:
            assert len(shifted.co_names) == len(code.co_names) + 300
