"""Code object -> list of `Instruction`s with jumps and exception handlers as references."""

from __future__ import annotations

import bisect
import dis
from types import CodeType

from . import opcodes
from .exception_table import parse_exception_table
from .instruction import ExceptionTableEntry, Instruction, Positions


def disassemble(code: CodeType) -> list[Instruction]:
    """Decode `code.co_code` into instructions.

    EXTENDED_ARG prefixes are folded into the instruction they extend, CACHE entries are
    dropped, jump targets and exception-table entries refer to `Instruction` objects.
    """
    instructions: list[Instruction] = []
    by_offset: dict[int, Instruction] = {}
    prefix_offsets: list[int] = []
    consts = code.co_consts
    for raw in dis.get_instructions(code):
        if raw.opcode == opcodes.EXTENDED_ARG:
            prefix_offsets.append(raw.offset)
            continue
        pos = raw.positions
        argval = raw.argval
        if raw.opcode in opcodes.CONST_OPS:
            argval = consts[raw.arg]  # 3.11's dis leaves KW_NAMES' argval as the index
        ins = Instruction(
            opname=raw.opname,
            opcode=raw.opcode,
            arg=raw.arg,
            argval=argval,
            positions=Positions(*pos) if pos is not None else Positions(),
            offset=raw.offset,
        )
        instructions.append(ins)
        by_offset[raw.offset] = ins
        for off in prefix_offsets:
            by_offset[off] = ins
        prefix_offsets.clear()

    for ins in instructions:
        if ins.opcode in opcodes.JUMP_OPS:
            try:
                ins.target = by_offset[ins.argval]
            except KeyError:
                raise ValueError(f"{ins!r} jumps to {ins.argval}, not an instruction") from None

    if code.co_exceptiontable:
        _attach_exception_entries(code, instructions, by_offset)
    return instructions


def _attach_exception_entries(
    code: CodeType, instructions: list[Instruction], by_offset: dict[int, Instruction]
) -> None:
    offsets = [ins.offset for ins in instructions]
    for raw in parse_exception_table(code.co_exceptiontable):
        lo = bisect.bisect_left(offsets, raw.start)
        hi = bisect.bisect_left(offsets, raw.end)
        covered = instructions[lo:hi]
        if not covered:
            continue
        entry = ExceptionTableEntry(
            start=covered[0],
            end=covered[-1],
            target=by_offset[raw.target],
            depth=raw.depth,
            lasti=raw.lasti,
        )
        for ins in covered:
            ins.exn_entry = entry
