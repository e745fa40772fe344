"""Readable listings of instruction lists (like `dis`, but from our model)."""

from __future__ import annotations

from . import opcodes
from .instruction import Instruction

_TABLE_OPS = opcodes.CONST_OPS | opcodes.NAME_OPS | opcodes.LOCAL_OPS | opcodes.FREE_OPS


def format_instructions(instructions: list[Instruction]) -> str:
    """One line per instruction: index, original offset, line, opname, oparg, meaning.

    `>>` marks jump targets, `H` exception handlers; jumps show `-> #index`, protected
    instructions `[exc -> #index depth=d lasti]`. Exception ranges are listed at the end.
    """
    index = {id(ins): i for i, ins in enumerate(instructions)}

    def ref(ins: Instruction | None) -> str:
        if ins is None:
            return "?"
        return f"#{index[id(ins)]}" if id(ins) in index else f"<outside: {ins.short()}>"

    jump_targets = {id(i.target) for i in instructions if i.target is not None}
    handlers = {id(i.exn_entry.target) for i in instructions if i.exn_entry is not None}
    lines = []
    last_line = None
    for i, ins in enumerate(instructions):
        mark = (">>" if id(ins) in jump_targets else "  ") + ("H" if id(ins) in handlers else " ")
        lineno = ins.positions.lineno
        line_col = str(lineno) if lineno is not None and lineno != last_line else ""
        if lineno is not None:
            last_line = lineno
        offset = "" if ins.offset is None else str(ins.offset)
        arg = "" if ins.arg is None else str(ins.arg)
        if ins.target is not None:
            meaning = f"-> {ref(ins.target)}"
        elif ins.opcode in _TABLE_OPS or (ins.argval is not None and ins.argval != ins.arg):
            meaning = (
                f"({ins.argval!r})"
                if not hasattr(ins.argval, "co_name")
                else (f"(<code {ins.argval.co_name}>)")
            )
        else:
            meaning = ""
        exc = ""
        if ins.exn_entry is not None:
            e = ins.exn_entry
            exc = f"  [exc -> {ref(e.target)} depth={e.depth}{' lasti' if e.lasti else ''}]"
        lines.append(
            f"{line_col:>5} {mark} {i:>4} {offset:>6} {ins.opname:<24} {arg:>5} {meaning}{exc}".rstrip()
        )
    entries = []
    for ins in instructions:
        e = ins.exn_entry
        if e is not None and all(e is not x for x in entries):
            entries.append(e)
    if entries:
        lines.append("ExceptionTable:")
        for e in entries:
            members = [i for i, ins in enumerate(instructions) if ins.exn_entry is e]
            lines.append(
                f"  #{members[0]} to #{members[-1]} -> {ref(e.target)} [{e.depth}]"
                f"{' lasti' if e.lasti else ''}"
            )
    return "\n".join(lines)
