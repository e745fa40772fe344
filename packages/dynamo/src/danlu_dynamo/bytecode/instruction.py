"""The instruction model: one object per real instruction, jumps and handlers as references.

EXTENDED_ARG prefixes and inline CACHE entries are not instructions here: the assembler adds
them back. So a list of `Instruction`s can be edited freely (insert, remove, reorder) and the
assembler recomputes every offset.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from . import opcodes


class Positions(NamedTuple):
    """Source span of an instruction; all None means "no location"."""

    lineno: int | None = None
    end_lineno: int | None = None
    col_offset: int | None = None
    end_col_offset: int | None = None


NO_POSITIONS = Positions()


@dataclasses.dataclass(eq=False)
class ExceptionTableEntry:
    """A protected range [start, end] (both inclusive, as instructions) and its handler.

    On an exception inside the range, the interpreter pops the value stack down to `depth`,
    pushes the offset of the raising instruction if `lasti`, pushes the exception and jumps
    to `target`. Membership is stored on each instruction (`Instruction.exn_entry`); the
    assembler re-derives the ranges from it, so `start`/`end` only describe the range as
    disassembled.
    """

    start: Instruction
    end: Instruction
    target: Instruction
    depth: int
    lasti: bool

    def handler_key(self) -> tuple[int, int, bool]:
        return (id(self.target), self.depth, self.lasti)

    def __repr__(self) -> str:
        return (
            f"ExceptionTableEntry({self.start.short()} .. {self.end.short()} -> "
            f"{self.target.short()}, depth={self.depth}, lasti={self.lasti})"
        )


@dataclasses.dataclass(eq=False)
class Instruction:
    """One bytecode instruction.

    `arg` is the raw oparg (EXTENDED_ARG folded in). For instructions that index a code table
    (constants, names, locals, cells), the assembler recomputes the index from `argval` and
    keeps only the flag bits of `arg` (e.g. LOAD_GLOBAL's push-NULL bit). For jumps, `target`
    is the instruction jumped to and `arg` is recomputed. `offset` is the byte offset in the
    code this was disassembled from (None for new instructions); it is informational only.
    """

    opname: str
    opcode: int
    arg: int | None = None
    argval: Any = None
    target: Instruction | None = None
    positions: Positions = NO_POSITIONS
    exn_entry: ExceptionTableEntry | None = None
    offset: int | None = None
    # EXTENDED_ARG prefixes a jump had when disassembled. The assembler never writes fewer: the
    # compiler sometimes settles on a longer, equally valid layout, and unchanged code should
    # come back byte for byte. (A spare EXTENDED_ARG 0 is harmless.)
    min_extended_args: int = 0

    @property
    def lineno(self) -> int | None:
        return self.positions.lineno

    @property
    def cache_entries(self) -> int:
        """How many inline CACHE code units follow this instruction."""
        return opcodes.cache_entries(self.opcode)

    @property
    def has_cache(self) -> bool:
        return self.cache_entries > 0

    @property
    def is_jump(self) -> bool:
        return self.opcode in opcodes.JUMP_OPS

    def short(self) -> str:
        at = f"@{self.offset}" if self.offset is not None else f"#{id(self) & 0xFFFF:04x}"
        return f"{self.opname}{at}"

    def __repr__(self) -> str:
        parts = [self.opname]
        if self.target is not None:
            parts.append(f"-> {self.target.short()}")
        elif self.arg is not None or self.argval is not None:
            parts.append(f"{self.arg} ({self.argval!r})")
        if self.offset is not None:
            parts.append(f"@{self.offset}")
        return f"<Instruction {' '.join(parts)}>"
