"""Edits used by the bytecode tests: padding with NOPs and recursive code transforms."""

from __future__ import annotations

import types

from danlu_dynamo.bytecode import CodeTables, assemble, create_instruction, disassemble
from danlu_dynamo.bytecode.opcodes import FUSED_WITH_NEXT


def pad_with_nops(instructions, *, every: int = 1, block: int = 300):
    """A NOP after every `every`-th instruction, plus a `block` of NOPs in the middle so that
    jumps across it need EXTENDED_ARG. NOPs inherit position and handler of their predecessor."""
    out = []
    middle = len(instructions) // 2
    for i, ins in enumerate(instructions):
        out.append(ins)
        if ins.opname in FUSED_WITH_NEXT or i + 1 == len(instructions):
            continue
        count = 1 if i % every == 0 else 0
        if i == middle:
            count += block
        for _ in range(count):
            nop = create_instruction("NOP", positions=ins.positions)
            nop.exn_entry = ins.exn_entry
            out.append(nop)
    return out


def transform_code(code: types.CodeType, edit=None, *, pad_tables: int = 0) -> types.CodeType:
    """Disassemble, optionally edit, and assemble `code` and (recursively) its nested code.

    `pad_tables` puts that many unused constants and names in front of the tables, so every
    constant and name index moves (and most need EXTENDED_ARG)."""
    tables = CodeTables.from_code(code)
    tables.consts = [
        transform_code(c, edit, pad_tables=pad_tables) if isinstance(c, types.CodeType) else c
        for c in tables.consts
    ]
    instructions = disassemble(code)
    # Nested code objects were replaced: point LOAD_CONSTs at the new ones.
    for ins in instructions:
        if isinstance(ins.argval, types.CodeType):
            ins.argval = tables.consts[ins.arg]
    if pad_tables:
        # co_consts[0] stays first: 3.11/3.12 take a new function's docstring from it.
        pad = [f"__pad_const_{i}" for i in range(pad_tables)]
        tables.consts = tables.consts[:1] + pad + tables.consts[1:]
        tables.names = [f"__pad_name_{i}" for i in range(pad_tables)] + tables.names
    if edit is not None:
        instructions = edit(instructions)
    return assemble(instructions, template=code, tables=tables)
