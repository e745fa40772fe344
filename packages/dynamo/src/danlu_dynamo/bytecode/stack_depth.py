"""Value-stack depth of an instruction list: per instruction and the maximum (`co_stacksize`).

A walk over the control-flow graph from the first instruction: each instruction's stack
effect comes from `dis.stack_effect` (per branch for jumps), and each protected instruction
also reaches its handler with `depth + lasti + 1` values (the exception on top).
"""

from __future__ import annotations

from . import opcodes
from .instruction import Instruction


class StackDepthError(ValueError):
    pass


def max_stack_depth(instructions: list[Instruction]) -> int:
    """The stack size the code needs. Opargs must be resolved (the assembler calls this after
    fixing them; disassembled instructions already have them)."""
    return _walk(instructions)[1]


def stack_depths(instructions: list[Instruction]) -> list[int | None]:
    """Stack depth on entry to each instruction; None for unreachable instructions."""
    return _walk(instructions)[0]


def _walk(instructions: list[Instruction]) -> tuple[list[int | None], int]:
    if not instructions:
        return [], 0
    index = {id(ins): i for i, ins in enumerate(instructions)}
    depth_at: list[int | None] = [None] * len(instructions)
    worklist: list[tuple[int, int]] = []
    max_depth = 0

    def reach(i: int, depth: int, source: Instruction) -> None:
        if depth < 0:
            raise StackDepthError(f"stack underflow reaching instruction {i} from {source!r}")
        seen = depth_at[i]
        if seen is None or depth > seen:
            depth_at[i] = depth
            worklist.append((i, depth))

    reach(0, 0, instructions[0])
    # Handlers count even when nothing reachable is protected by them (the compiler reaches
    # them from its SETUP_* pseudo-instructions; debuggers can jump into such code).
    for ins in instructions:
        entry = ins.exn_entry
        if entry is not None and id(entry.target) in index:
            handler_depth = entry.depth + int(entry.lasti) + 1
            max_depth = max(max_depth, handler_depth)
            reach(index[id(entry.target)], handler_depth, ins)
    while worklist:
        i, depth = worklist.pop()
        if depth_at[i] != depth:  # superseded by a deeper visit
            continue
        ins = instructions[i]
        op, arg = ins.opcode, ins.arg
        entry = ins.exn_entry
        if entry is not None:
            handler_depth = entry.depth + int(entry.lasti) + 1
            max_depth = max(max_depth, handler_depth)
            reach(_index_of(index, entry.target, ins), handler_depth, ins)
        if op in opcodes.JUMP_OPS:
            jumped = depth + opcodes.stack_effect(op, arg, jump=True)
            max_depth = max(max_depth, jumped)
            reach(_index_of(index, ins.target, ins), jumped, ins)
        if op not in opcodes.TERMINATOR_OPS:
            after = depth + opcodes.stack_effect(op, arg, jump=False)
            max_depth = max(max_depth, after)
            if i + 1 < len(instructions):
                reach(i + 1, after, ins)
            else:
                raise StackDepthError(f"control falls off the end after {ins!r}")
    return depth_at, max_depth


def _index_of(index: dict[int, int], target: Instruction | None, source: Instruction) -> int:
    if target is None or id(target) not in index:
        raise StackDepthError(f"{source!r} refers to an instruction not in the list")
    return index[id(target)]
