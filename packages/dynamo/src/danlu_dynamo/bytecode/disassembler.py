"""Code object -> list of `Instruction`s with jumps and exception handlers as references."""

from __future__ import annotations

import bisect
import dis
from types import CodeType
from typing import Any

from . import opcodes
from .exception_table import parse_exception_table
from .instruction import ExceptionTableEntry, Instruction, Positions


def disassemble(code: CodeType) -> list[Instruction]:
    """Decode `code.co_code` into instructions.

    EXTENDED_ARG prefixes are folded into the instruction they extend, CACHE entries are
    dropped, jump targets and exception-table entries refer to `Instruction` objects.
    `argval` is what `dis` shows, except that 3.11's KW_NAMES gets the constant (the tuple of
    names) rather than its index.
    """
    raw = code.co_code
    positions = list(code.co_positions())
    decode = _ArgDecoder(code)
    opname_of = opcodes.OPNAME
    has_arg = opcodes.HAS_ARG
    jump_ops = opcodes.JUMP_OPS
    ext = opcodes.EXTENDED_ARG
    instructions: list[Instruction] = []
    by_offset: dict[int, Instruction] = {}
    jump_offsets: list[int] = []
    prefix_start: int | None = None
    extended = 0
    offset = 0
    n = len(raw)
    while offset < n:
        op = raw[offset]
        oparg = raw[offset + 1] | extended
        if op == ext:
            extended = oparg << 8
            if prefix_start is None:
                prefix_start = offset
            offset += 2
            continue
        extended = 0
        name = opname_of.get(op)
        if name is None:
            raise ValueError(f"unknown opcode {op} at offset {offset} in {code!r}")
        arg = oparg if op in has_arg else None
        if op in jump_ops:
            argval = _jump_target(op, oparg, offset)
            jump_offsets.append(argval)
        else:
            argval = decode(op, arg)
        pos = positions[offset // 2]
        ins = Instruction(
            opname=name,
            opcode=op,
            arg=arg,
            argval=argval,
            positions=Positions(*pos),
            offset=offset,
        )
        instructions.append(ins)
        by_offset[offset] = ins
        if prefix_start is not None and op in jump_ops:
            ins.min_extended_args = (offset - prefix_start) // 2
        if prefix_start is not None:
            for off in range(prefix_start, offset, 2):
                by_offset[off] = ins
            prefix_start = None
        offset += 2 * (1 + opcodes.CACHE_ENTRIES.get(op, 0))

    for ins in instructions:
        if ins.opcode in jump_ops:
            try:
                ins.target = by_offset[ins.argval]
            except KeyError:
                raise ValueError(f"{ins!r} jumps to {ins.argval}, not an instruction") from None

    if code.co_exceptiontable:
        _attach_exception_entries(code, instructions, by_offset)
    return instructions


def _jump_target(op: int, oparg: int, offset: int) -> int:
    if op in opcodes.ABSOLUTE_JUMP_OPS:
        return oparg * 2
    after = offset + 2 * (1 + opcodes.CACHE_ENTRIES.get(op, 0))
    if op in opcodes.BACKWARD_JUMP_OPS:
        return after - 2 * oparg
    return after + 2 * oparg


class _ArgDecoder:
    """oparg -> argval for one code object, the way `dis` presents it."""

    def __init__(self, code: CodeType) -> None:
        self.consts = code.co_consts
        self.names = code.co_names
        varnames = code.co_varnames
        seen = set(varnames)
        self.localsplus = (
            list(varnames) + [c for c in code.co_cellvars if c not in seen] + list(code.co_freevars)
        )

    def __call__(self, op: int, arg: int | None) -> Any:
        if arg is None:
            return None
        if op in opcodes.CONST_OPS:
            return self.consts[arg]
        if op in opcodes.NAME_OPS:
            return self.names[arg >> opcodes.NAME_SHIFT.get(op, 0)]
        if op in opcodes.PAIRED_LOCAL_OPS:
            return (self.localsplus[arg >> 4], self.localsplus[arg & 15])
        if op in opcodes.LOCAL_OPS or op in opcodes.FREE_OPS:
            return self.localsplus[arg]
        if op in opcodes.COMPARE_OPS:
            return dis.cmp_op[arg >> opcodes.COMPARE_SHIFT]
        special = _SPECIAL_ARGVAL.get(op)
        if special is not None:
            return special(arg)
        return arg


def _special_argvals() -> dict[int, Any]:
    out = {}
    if "FORMAT_VALUE" in opcodes.OPMAP:  # 3.11, 3.12
        converters = (None, str, repr, ascii)
        out[opcodes.OPMAP["FORMAT_VALUE"]] = lambda arg: (converters[arg & 3], bool(arg & 4))
    if "CONVERT_VALUE" in opcodes.OPMAP:  # 3.13
        out[opcodes.OPMAP["CONVERT_VALUE"]] = lambda arg: (None, str, repr, ascii)[arg]
    return out


_SPECIAL_ARGVAL = _special_argvals()


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
