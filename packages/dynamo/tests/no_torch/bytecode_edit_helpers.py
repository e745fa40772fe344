"""Edits used by the bytecode tests: padding with NOPs and recursive code transforms."""

from __future__ import annotations

import random
import types

from danlu_dynamo.bytecode import CodeTables, assemble, create_instruction, disassemble
from danlu_dynamo.bytecode.opcodes import (
    BACKWARD_JUMP_OPS,
    CONDITIONAL_INVERSE,
    FUSED_WITH_NEXT,
    JUMP_DIRECTION_TWIN,
    REQUIRED_SUCCESSOR,
    TERMINATOR_OPS,
)


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


def shuffle_blocks(instructions, seed: int = 0):
    """Reorder basic blocks at random (the first block stays first): jumps change direction,
    fall-through edges become explicit JUMPs, protected ranges become non-contiguous.

    Orders that CPython cannot express are avoided: a jump with no twin of the other direction
    (FOR_ITER, SEND, 3.11's JUMP_IF_*_OR_POP forward; JUMP_BACKWARD_NO_INTERRUPT backward)
    keeps its target on the same side, and fused instruction pairs stay in one block.
    """
    rng = random.Random(seed)
    n = len(instructions)
    index = {id(ins): i for i, ins in enumerate(instructions)}
    fused = FUSED_WITH_NEXT | set(REQUIRED_SUCCESSOR)
    starts = {0}
    for i, ins in enumerate(instructions):
        if ins.target is not None:
            starts.add(index[id(ins.target)])
        if ins.exn_entry is not None:
            starts.add(index[id(ins.exn_entry.target)])
        if (ins.target is not None or ins.opcode in TERMINATOR_OPS) and i + 1 < n:
            starts.add(i + 1)
    starts = sorted(s for s in starts if s == 0 or instructions[s - 1].opname not in fused)
    first_resume = next(i for i, ins in enumerate(instructions) if ins.opname == "RESUME")
    starts = [s for s in starts if s == 0 or s > first_resume]  # the prologue stays whole
    blocks = [instructions[a:b] for a, b in zip(starts, starts[1:] + [n])]
    block_of = {id(ins): k for k, block in enumerate(blocks) for ins in block}

    # Ordering constraints (before, after) for jumps that only go one way.
    after_of = {k: set() for k in range(len(blocks))}
    for k, block in enumerate(blocks):
        if k:
            after_of[0].add(k)
        for ins in block:
            if ins.target is None:
                continue
            t = block_of[id(ins.target)]
            one_way_forward = ins.opname not in JUMP_DIRECTION_TWIN and (
                ins.opname not in CONDITIONAL_INVERSE
            )
            if t == k:
                continue
            if ins.opcode in BACKWARD_JUMP_OPS and one_way_forward:
                after_of[t].add(k)  # the target block must stay before
            elif one_way_forward:
                after_of[k].add(t)
    pending = {k: 0 for k in range(len(blocks))}
    for later in after_of.values():
        for t in later:
            pending[t] += 1
    order = []
    ready = [k for k in range(len(blocks)) if pending[k] == 0]
    while ready:
        k = ready.pop(rng.randrange(len(ready)))
        order.append(k)
        for t in after_of[k]:
            pending[t] -= 1
            if pending[t] == 0:
                ready.append(t)
    assert len(order) == len(blocks), "ordering constraints form a cycle"

    out = []
    for pos, k in enumerate(order):
        block = blocks[k]
        out.extend(block)
        last = block[-1]
        falls_through = last.opcode not in TERMINATOR_OPS and k + 1 < len(blocks)
        next_in_order = order[pos + 1] if pos + 1 < len(order) else None
        if falls_through and next_in_order != k + 1:
            jump = create_instruction("JUMP", target=blocks[k + 1][0], positions=last.positions)
            jump.exn_entry = last.exn_entry
            out.append(jump)
    return out
