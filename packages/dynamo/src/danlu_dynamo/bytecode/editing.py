"""Editing instruction lists without breaking references (jump targets, handlers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .instruction import ExceptionTableEntry, Instruction


def clone_instructions(instructions: Sequence[Instruction]) -> list[Instruction]:
    """Copies of `instructions` whose jump targets and exception entries point into the copy
    (references to instructions outside the list are kept as they are)."""
    copies = {id(ins): dataclasses.replace(ins) for ins in instructions}
    entries: dict[int, ExceptionTableEntry] = {}

    def mapped(ins: Instruction) -> Instruction:
        return copies.get(id(ins), ins)

    out = []
    for ins in instructions:
        new = copies[id(ins)]
        if ins.target is not None:
            new.target = mapped(ins.target)
        entry = ins.exn_entry
        if entry is not None:
            if id(entry) not in entries:
                entries[id(entry)] = ExceptionTableEntry(
                    mapped(entry.start),
                    mapped(entry.end),
                    mapped(entry.target),
                    entry.depth,
                    entry.lasti,
                )
            new.exn_entry = entries[id(entry)]
        out.append(new)
    return out


def replace_instructions(
    instructions: list[Instruction], replacements: Mapping[int, Sequence[Instruction]]
) -> None:
    """Replace, in place, each instruction whose id() is a key by the (non-empty) sequence.

    Jumps and handlers that pointed at a replaced instruction now point at the first of its
    replacements; replacements without an exception entry inherit the replaced one's.
    """
    if not replacements:
        return
    out: list[Instruction] = []
    first: dict[int, Instruction] = {}
    for ins in instructions:
        new = replacements.get(id(ins))
        if new is None:
            out.append(ins)
            continue
        if not new:
            raise ValueError(f"empty replacement for {ins!r}")
        for n in new:
            if n.exn_entry is None:
                n.exn_entry = ins.exn_entry
        first[id(ins)] = new[0]
        out.extend(new)
    for ins in out:
        if ins.target is not None and id(ins.target) in first:
            ins.target = first[id(ins.target)]
        entry = ins.exn_entry
        if entry is not None:
            for field in ("start", "end", "target"):
                ref = getattr(entry, field)
                if id(ref) in first:
                    setattr(entry, field, first[id(ref)])
    instructions[:] = out


def redirect_jumps(instructions: Sequence[Instruction], old: Instruction, new: Instruction) -> int:
    """Make jumps and handlers that target `old` target `new`; returns how many changed."""
    count = 0
    for ins in instructions:
        if ins.target is old:
            ins.target = new
            count += 1
        if ins.exn_entry is not None and ins.exn_entry.target is old:
            ins.exn_entry.target = new
            count += 1
    return count


def protect(
    body: Sequence[Instruction], handler: Instruction, *, depth: int, lasti: bool = False
) -> ExceptionTableEntry:
    """Put `body` (consecutive instructions) under a new handler: on an exception the stack
    is cut to `depth`, the raising offset pushed if `lasti`, the exception pushed, and control
    goes to `handler` (which typically starts with PUSH_EXC_INFO)."""
    if not body:
        raise ValueError("nothing to protect")
    entry = ExceptionTableEntry(body[0], body[-1], handler, depth, lasti)
    for ins in body:
        ins.exn_entry = entry
    return entry
