"""Which plain locals may still be read: what a resume function must receive.

Backward data flow over the control-flow graph (fall-through, jumps, exception edges). A local
is live at an instruction if some path from there reads it before writing or deleting it.
Cells and free variables are not tracked: they travel in the closure.
"""

from __future__ import annotations

from collections.abc import Collection

from . import opcodes
from .instruction import Instruction

_READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"}
_WRITES = {"STORE_FAST", "DELETE_FAST"}


def _uses_defs(ins: Instruction) -> tuple[tuple[str, ...], tuple[str, ...]]:
    name = ins.opname
    if name in _READS:
        return (ins.argval,), ()
    if name in _WRITES:
        return (), (ins.argval,)
    if name == "LOAD_FAST_LOAD_FAST":
        return tuple(ins.argval), ()
    if name == "STORE_FAST_LOAD_FAST":  # stores the first, then loads the second
        stored, loaded = ins.argval
        return ((loaded,) if loaded != stored else ()), (stored,)
    if name == "STORE_FAST_STORE_FAST":
        return (), tuple(ins.argval)
    return (), ()


def live_locals(
    instructions: list[Instruction], *, ignore: Collection[str] = ()
) -> list[frozenset[str]]:
    """For each instruction, the locals live on entry to it. Pass the code's cell and free
    variable names as `ignore` (3.13 reads cells for closures with LOAD_FAST)."""
    n = len(instructions)
    index = {id(ins): i for i, ins in enumerate(instructions)}
    succs: list[list[int]] = [[] for _ in range(n)]
    # An exception can leave an instruction before its own write happens.
    raise_succs: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(instructions):
        if ins.target is not None and id(ins.target) in index:
            succs[i].append(index[id(ins.target)])
        if ins.opcode not in opcodes.TERMINATOR_OPS and i + 1 < n:
            succs[i].append(i + 1)
        if ins.exn_entry is not None and id(ins.exn_entry.target) in index:
            raise_succs[i].append(index[id(ins.exn_entry.target)])
    uses_defs = [_uses_defs(ins) for ins in instructions]
    ignored = frozenset(ignore)
    live: list[frozenset[str]] = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            uses, defs = uses_defs[i]
            out: set[str] = set()
            for s in succs[i]:
                out |= live[s]
            new = set(uses) | (out - set(defs))
            for s in raise_succs[i]:
                new |= live[s]
            frozen = frozenset(new - ignored)
            if frozen != live[i]:
                live[i] = frozen
                changed = True
    return live


def live_locals_at(
    instructions: list[Instruction], at: Instruction, *, ignore: Collection[str] = ()
) -> frozenset[str]:
    for ins, names in zip(instructions, live_locals(instructions, ignore=ignore)):
        if ins is at:
            return names
    raise ValueError(f"{at!r} is not in the instruction list")
