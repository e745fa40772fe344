"""Resume functions: a new function that continues an original code object at an instruction.

After a graph break, the emitted code calls a resume function with the values on the stack at
the break and the live locals. The resume function's code is derived from the *original* code
object: a prologue, optional caller-provided prefix instructions, instructions that rebuild the
value stack, then a jump to the original instruction; the original body follows unchanged.

Cells of the original function (its cellvars) and its free variables become free variables of
the resume function, in `resume_closure_names(original)` order: the caller passes the original
frame's cell objects as the new function's closure.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from types import CodeType

from . import opcodes
from .assembler import assemble
from .builders import create_instruction, jump_to, load_local, push_null
from .code_builder import function_prologue
from .code_tables import CodeTables
from .disassembler import disassemble
from .editing import replace_instructions
from .instruction import NO_POSITIONS, Instruction

_UNSUPPORTED_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_PROLOGUE_OPS = {"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP"}

StackItem = str | None | Sequence[Instruction]


def resume_closure_names(original: CodeType) -> tuple[str, ...]:
    """The free variables of every resume function of `original`, in closure order."""
    return tuple(original.co_cellvars) + tuple(original.co_freevars)


def make_resume_code(
    original: CodeType,
    offset: int,
    *,
    stack: Sequence[StackItem] = (),
    live_locals: Sequence[str] = (),
    prefix: Sequence[Instruction] = (),
    name: str | None = None,
) -> CodeType:
    """Code that runs `original` from the instruction at byte `offset`.

    Arguments, in order: one per string in `stack`, then `live_locals`. `stack` lists the
    value stack at `offset`, bottom first: a string is an argument of that name, None is a
    NULL slot (e.g. below a callable on 3.11/3.12), and a list of instructions pushes one value
    computed in the resume function. `prefix` runs first (after the prologue).
    Locals of `original` not passed in start unbound: their loads are made checked.
    """
    if original.co_flags & _UNSUPPORTED_FLAGS:
        raise ValueError(
            f"resume functions for generators/coroutines are not supported: {original}"
        )
    cells = set(original.co_cellvars) | set(original.co_freevars)
    stack_args = [s for s in stack if isinstance(s, str)]
    argnames = stack_args + list(live_locals)
    if len(set(argnames)) != len(argnames):
        raise ValueError(f"duplicate argument names {argnames}")
    for n in live_locals:
        if n in cells:
            raise ValueError(f"{n!r} is a cell/free variable: it travels in the closure")
        if n not in original.co_varnames:
            raise ValueError(f"{n!r} is not a local of {original.co_name}")

    _, body, target = _split_at(original, offset)
    _check_unbound_loads(body, set(argnames))

    freevars = resume_closure_names(original)
    entry: list[Instruction] = function_prologue((), freevars)
    entry += _located(list(prefix) + _rebuild_stack(stack) + jump_to(target), target)

    varnames = argnames + [v for v in original.co_varnames if v not in argnames and v not in cells]
    tables = CodeTables(
        consts=list(original.co_consts),
        names=list(original.co_names),
        varnames=varnames,
        cellvars=[],
        freevars=list(freevars),
    )
    name = name or f"__resume_at_{offset}"
    flags = original.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    if freevars:
        flags |= inspect.CO_NESTED
    return assemble(
        entry + body,
        template=original,
        tables=tables,
        co_name=name,
        co_qualname=name,
        co_argcount=len(argnames),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=flags,
    )


def make_continuation_code(
    original: CodeType,
    offset: int,
    *,
    prefix: Sequence[Instruction] = (),
    stack: Sequence[StackItem] = (),
) -> CodeType:
    """Code with the same signature, cells and free variables as `original` that runs
    `prefix`, rebuilds `stack` (as in `make_resume_code`; strings name locals here), then
    continues in the original instructions at byte `offset`.

    This is the shape of transformed code the frame hook can run in place of the original:
    e.g. `prefix` calls a compiled graph and stores its outputs into the locals the original
    code reads from `offset` on. Loads of locals other than the arguments are checked.
    """
    if original.co_flags & _UNSUPPORTED_FLAGS:
        raise ValueError(f"generators/coroutines are not supported: {original}")
    prologue, body, target = _split_at(original, offset)
    nargs = original.co_argcount + original.co_kwonlyargcount
    nargs += bool(original.co_flags & inspect.CO_VARARGS)
    nargs += bool(original.co_flags & inspect.CO_VARKEYWORDS)
    _check_unbound_loads(body, set(original.co_varnames[:nargs]))
    entry = prologue + _located(list(prefix) + _rebuild_stack(stack) + jump_to(target), target)
    return assemble(entry + body, template=original)


def _split_at(
    original: CodeType, offset: int
) -> tuple[list[Instruction], list[Instruction], Instruction]:
    """(prologue, rest, the instruction at `offset`), refusing offsets we cannot jump to."""
    instructions = disassemble(original)
    target = next((ins for ins in instructions if ins.offset == offset), None)
    if target is None:
        raise ValueError(f"no instruction at offset {offset} in {original.co_name}")
    position = next(i for i, ins in enumerate(instructions) if ins is target)
    if position > 0 and instructions[position - 1].opname in opcodes.FUSED_WITH_NEXT:
        raise ValueError(
            f"cannot resume at offset {offset}: it is fused with the "
            f"{instructions[position - 1].opname} before it"
        )
    prologue, body = _split_prologue(instructions)
    if not any(ins is target for ins in body):
        raise ValueError(f"offset {offset} is inside the prologue of {original.co_name}")
    return prologue, body, target


def _located(instructions: list[Instruction], target: Instruction) -> list[Instruction]:
    """Entry code without a source location reports the line it resumes at (tracebacks)."""
    for ins in instructions:
        if ins.positions == NO_POSITIONS:
            ins.positions = target.positions
    return instructions


def _rebuild_stack(stack: Sequence[StackItem]) -> list[Instruction]:
    out: list[Instruction] = []
    for item in stack:
        if item is None:
            out += push_null()
        elif isinstance(item, str):
            out += load_local(item)
        else:
            out += list(item)
    return out


def _split_prologue(body: list[Instruction]) -> tuple[list[Instruction], list[Instruction]]:
    """What precedes the first RESUME (cell creation, closure copy) plus that RESUME, and
    the rest."""
    for i, ins in enumerate(body):
        if ins.opname == "RESUME":
            head = body[: i + 1]
            if any(h.opname not in _PROLOGUE_OPS | {"RESUME"} for h in head):
                return [], body
            return head, body[i + 1 :]
    return [], body


def _check_unbound_loads(body: list[Instruction], bound: set[str]) -> None:
    """3.12+ LOAD_FAST (and 3.13's paired forms) trust that the local is bound; locals we
    don't pass in may not be, so their loads become LOAD_FAST_CHECK."""
    if "LOAD_FAST_CHECK" not in opcodes.OPMAP:
        return  # 3.11's LOAD_FAST always checks
    checked = opcodes.OPMAP["LOAD_FAST_CHECK"]
    replacements: dict[int, list[Instruction]] = {}
    for ins in body:
        name = ins.opname
        if name == "LOAD_FAST" and ins.argval not in bound:
            ins.opname, ins.opcode = "LOAD_FAST_CHECK", checked
        elif name == "LOAD_FAST_LOAD_FAST" and not set(ins.argval) <= bound:
            replacements[id(ins)] = [
                create_instruction("LOAD_FAST_CHECK", argval=v, positions=ins.positions)
                for v in ins.argval
            ]
        elif name == "STORE_FAST_LOAD_FAST":
            stored, loaded = ins.argval
            if loaded not in bound and loaded != stored:
                replacements[id(ins)] = [
                    create_instruction("STORE_FAST", argval=stored, positions=ins.positions),
                    create_instruction("LOAD_FAST_CHECK", argval=loaded, positions=ins.positions),
                ]
    replace_instructions(body, replacements)
