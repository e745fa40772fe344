"""Building blocks for emitted code: single instructions and version-neutral sequences.

Each sequence helper returns a fresh list of `Instruction`s. Table indices (constants, names,
locals) are filled in by the assembler from `argval`, so helpers only name things.

Call convention (what `call_function` expects on the stack, bottom to top):
  3.11/3.12: NULL, callable, args...   3.13: callable, NULL, args...
`push_callable` and `load_global(..., push_null=True)` produce the right prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import opcodes
from .instruction import NO_POSITIONS, Instruction, Positions

_MISSING = object()


def create_instruction(
    name: str,
    *,
    arg: int | None = None,
    argval: Any = _MISSING,
    target: Instruction | None = None,
    positions: Positions = NO_POSITIONS,
) -> Instruction:
    """One instruction by name.

    Give `argval` for instructions that index a table (the constant, the name, the local's
    name); the assembler computes the index. For other instructions give `arg` (or an int
    `argval`). Jumps take `target`; "JUMP" (and on 3.11 "POP_JUMP_IF_<cond>") is accepted and
    the assembler picks the forward or backward form.
    """
    generic = opcodes.GENERIC_JUMPS.get(name)
    if generic is not None:
        name = generic[0]
    if name not in opcodes.OPMAP:
        raise ValueError(f"unknown opcode {name!r} on Python {opcodes.PY_VERSION}")
    op = opcodes.OPMAP[name]
    if op in opcodes.JUMP_OPS:
        if target is None:
            raise ValueError(f"{name} needs a target instruction")
    elif target is not None:
        raise ValueError(f"{name} is not a jump")
    if argval is _MISSING:
        argval = arg
    elif arg is None and op in opcodes.COMPARE_OPS:
        arg = opcodes.compare_arg(argval)
    if op not in opcodes.HAS_ARG and arg is None and argval is None:
        arg = 0
    return Instruction(
        opname=name, opcode=op, arg=arg, argval=argval, target=target, positions=positions
    )


# -- loads and stores ---------------------------------------------------------------------------


def load_const(value: Any) -> list[Instruction]:
    return [create_instruction("LOAD_CONST", argval=value)]


def load_local(name: str) -> list[Instruction]:
    return [create_instruction("LOAD_FAST", argval=name)]


def load_local_checked(name: str) -> list[Instruction]:
    """Load a local that may be unbound (raises UnboundLocalError instead of reading NULL)."""
    op = "LOAD_FAST_CHECK" if "LOAD_FAST_CHECK" in opcodes.OPMAP else "LOAD_FAST"
    return [create_instruction(op, argval=name)]


def store_local(name: str) -> list[Instruction]:
    return [create_instruction("STORE_FAST", argval=name)]


def store_locals(names: Sequence[str]) -> list[Instruction]:
    """Pop len(names) values into locals; the top of stack goes to names[-1]."""
    return [ins for name in reversed(names) for ins in store_local(name)]


def load_deref(name: str) -> list[Instruction]:
    return [create_instruction("LOAD_DEREF", argval=name)]


def load_global(name: str, *, push_null: bool = False) -> list[Instruction]:
    """Load a global (or builtin); with push_null, ready to be called by `call_function`."""
    return [create_instruction("LOAD_GLOBAL", arg=int(push_null), argval=name)]


def load_attr(name: str) -> list[Instruction]:
    """Replace the object on top of the stack by its attribute `name`."""
    return [create_instruction("LOAD_ATTR", arg=0, argval=name)]


def load_method(name: str) -> list[Instruction]:
    """Replace the object on top by its method `name`, ready for `call_function`
    (3.11 LOAD_METHOD; 3.12+ LOAD_ATTR with the method bit)."""
    if opcodes.PY_VERSION == (3, 11):
        return [create_instruction("LOAD_METHOD", argval=name)]
    return [create_instruction("LOAD_ATTR", arg=1, argval=name)]


def push_null() -> list[Instruction]:
    return [create_instruction("PUSH_NULL")]


def push_callable(load: Sequence[Instruction]) -> list[Instruction]:
    """`load` pushes a callable; add the NULL slot the call convention of this version needs."""
    if opcodes.PY_VERSION >= (3, 13):
        return [*load, *push_null()]
    return [*push_null(), *load]


def pop_top() -> list[Instruction]:
    return [create_instruction("POP_TOP")]


def dup_top() -> list[Instruction]:
    return [create_instruction("COPY", arg=1)]


def rotate(n: int) -> list[Instruction]:
    """Move the top of stack down to position n (1 = top), shifting the others up."""
    if n <= 1:
        return []
    return [create_instruction("SWAP", arg=i) for i in range(n, 1, -1)]


def enter_with(load_context_manager: Sequence[Instruction]) -> list[Instruction]:
    """Call the context manager's __enter__ (result dropped) and leave its bound __exit__ on
    the stack: the stack slot a `with` body runs above. Used to re-enter a with block in a
    resume function; the original body's exception-table entries then cover the exit."""
    return [
        *load_context_manager,
        create_instruction("BEFORE_WITH"),
        *pop_top(),
    ]


# -- building and unpacking -------------------------------------------------------------------


def build_tuple(n: int) -> list[Instruction]:
    return [create_instruction("BUILD_TUPLE", arg=n)]


def build_list(n: int) -> list[Instruction]:
    return [create_instruction("BUILD_LIST", arg=n)]


def build_map(n: int) -> list[Instruction]:
    return [create_instruction("BUILD_MAP", arg=n)]


def unpack_sequence(n: int) -> list[Instruction]:
    """Replace a length-n sequence on top by its items, item 0 ending on top."""
    return [create_instruction("UNPACK_SEQUENCE", arg=n)]


def unpack_to_locals(names: Sequence[str]) -> list[Instruction]:
    """Pop a sequence and store its items into `names` in order."""
    return [*unpack_sequence(len(names)), *(i for n in names for i in store_local(n))]


def subscr_const(index: Any) -> list[Instruction]:
    """Replace the object on top by obj[index]."""
    return [*load_const(index), create_instruction("BINARY_SUBSCR")]


# -- calls and returns --------------------------------------------------------------------------


def call_function(nargs: int, *, kw_names: Sequence[str] = ()) -> list[Instruction]:
    """Call with the stack holding the callable + NULL slot (see module doc) and `nargs`
    arguments, the last len(kw_names) of them passed by keyword. Leaves the result."""
    kw_names = tuple(kw_names)
    if len(kw_names) > nargs:
        raise ValueError("more keyword names than arguments")
    out: list[Instruction] = []
    if opcodes.PY_VERSION >= (3, 13):
        if kw_names:
            out += load_const(kw_names)
            out.append(create_instruction("CALL_KW", arg=nargs))
        else:
            out.append(create_instruction("CALL", arg=nargs))
        return out
    if kw_names:
        out.append(create_instruction("KW_NAMES", argval=kw_names))
    if opcodes.PY_VERSION == (3, 11):
        out.append(create_instruction("PRECALL", arg=nargs))
    out.append(create_instruction("CALL", arg=nargs))
    return out


def call(
    load_callable: Sequence[Instruction],
    args: Sequence[Sequence[Instruction]] = (),
    kwargs: dict[str, Sequence[Instruction]] | None = None,
) -> list[Instruction]:
    """callable(*args, **kwargs) where each piece is a list of instructions pushing one value."""
    kwargs = kwargs or {}
    out = push_callable(load_callable)
    for a in args:
        out += a
    for v in kwargs.values():
        out += v
    out += call_function(len(args) + len(kwargs), kw_names=tuple(kwargs))
    return out


def new_function(code: Any, closure_names: Sequence[str] = ()) -> list[Instruction]:
    """Push a new function made from the code object `code` (a constant) whose closure holds
    the cells of `closure_names` (cell or free variables of the code being built)."""
    out: list[Instruction] = []
    if closure_names:
        # 3.13 compiles LOAD_CLOSURE as a LOAD_FAST of the cell's slot.
        load_cell = "LOAD_FAST" if opcodes.PY_VERSION >= (3, 13) else "LOAD_CLOSURE"
        out += [create_instruction(load_cell, argval=n) for n in closure_names]
        out += build_tuple(len(closure_names))
    out += load_const(code)
    closure_flag = 8 if closure_names else 0
    if opcodes.PY_VERSION >= (3, 13):
        out.append(create_instruction("MAKE_FUNCTION"))
        if closure_flag:
            out.append(create_instruction("SET_FUNCTION_ATTRIBUTE", arg=closure_flag))
    else:
        out.append(create_instruction("MAKE_FUNCTION", arg=closure_flag))
    return out


def return_value() -> list[Instruction]:
    return [create_instruction("RETURN_VALUE")]


def return_const(value: Any) -> list[Instruction]:
    return [*load_const(value), *return_value()]


def pop_jump_if(truth: bool, target: Instruction) -> list[Instruction]:
    """Pop the top of stack and jump to `target` if its truth value is `truth` (any direction).
    3.13's conditional jumps need an exact bool, so a TO_BOOL comes first there."""
    out = [create_instruction("TO_BOOL")] if opcodes.PY_VERSION >= (3, 13) else []
    name = "POP_JUMP_IF_TRUE" if truth else "POP_JUMP_IF_FALSE"
    out.append(create_instruction(name, target=target))
    return out


def pop_jump_if_none(is_none: bool, target: Instruction) -> list[Instruction]:
    name = "POP_JUMP_IF_NONE" if is_none else "POP_JUMP_IF_NOT_NONE"
    return [create_instruction(name, target=target)]


def set_positions(instructions: Sequence[Instruction], positions: Positions) -> None:
    """Give emitted instructions a source location (e.g. the user line they stand for), so
    tracebacks and line numbers point there."""
    for ins in instructions:
        ins.positions = positions


def jump_to(target: Instruction) -> list[Instruction]:
    """Unconditional jump; the assembler chooses JUMP_FORWARD or JUMP_BACKWARD."""
    return [create_instruction("JUMP", target=target)]


def call_and_return(
    load_callable: Sequence[Instruction],
    num_stack: int,
    live_locals: Sequence[str],
    *,
    stack_temp_prefix: str = "___stack",
) -> list[Instruction]:
    """Tail call: pop the `num_stack` values on top of the stack, then
    `return callable(*stack_values, *live_locals)`. The values are parked in temporary
    locals named `{stack_temp_prefix}{i}` (added to co_varnames by the assembler).
    The stack must hold real values (no NULL slots) in those positions.
    """
    temps = [f"{stack_temp_prefix}{i}" for i in range(num_stack)]
    out = store_locals(temps)
    out += push_callable(load_callable)
    for name in temps:
        out += load_local(name)
    for name in live_locals:
        out += load_local(name)
    out += call_function(num_stack + len(live_locals))
    out += return_value()
    return out
