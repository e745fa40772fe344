"""New code objects from instruction lists: the prologue every function needs, then assemble."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from types import CodeType, FunctionType
from typing import Any

from .assembler import assemble
from .builders import create_instruction
from .code_tables import CodeTables
from .instruction import Instruction

_TEMPLATE: CodeType = (lambda: None).__code__


def function_prologue(
    cellvars: Sequence[str] = (), freevars: Sequence[str] = ()
) -> list[Instruction]:
    """COPY_FREE_VARS (closure -> frame), MAKE_CELL per cell, RESUME 0: what the compiler puts
    first in a function that has these cells and free variables."""
    out = []
    for name in cellvars:
        out.append(create_instruction("MAKE_CELL", argval=name))
    if freevars:
        out.append(create_instruction("COPY_FREE_VARS", arg=len(freevars)))
    out.append(create_instruction("RESUME", arg=0))
    return out


def make_code(
    instructions: list[Instruction],
    *,
    name: str,
    argnames: Sequence[str] = (),
    varnames: Sequence[str] = (),
    cellvars: Sequence[str] = (),
    freevars: Sequence[str] = (),
    consts: Sequence[Any] = (),
    filename: str = "<danlu-generated>",
    firstlineno: int = 1,
    qualname: str | None = None,
    flags: int | None = None,
    add_prologue: bool = True,
) -> CodeType:
    """A brand-new function code object taking positional `argnames`.

    With `add_prologue`, the COPY_FREE_VARS/MAKE_CELL/RESUME prologue is put in front of
    `instructions`. Locals used by the instructions but not listed are added to co_varnames.
    """
    if flags is None:
        flags = inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS
        if freevars:
            flags |= inspect.CO_NESTED
    body = (
        function_prologue(cellvars, freevars) + list(instructions)
        if add_prologue
        else list(instructions)
    )
    all_varnames = list(argnames) + [v for v in varnames if v not in argnames]
    tables = CodeTables(
        consts=list(consts) or [None],
        names=[],
        varnames=all_varnames,
        cellvars=list(cellvars),
        freevars=list(freevars),
    )
    return assemble(
        body,
        template=_TEMPLATE,
        tables=tables,
        co_name=name,
        co_qualname=qualname or name,
        co_filename=filename,
        co_firstlineno=firstlineno,
        co_argcount=len(argnames),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=flags,
    )


def make_function(
    code: CodeType,
    globals_: dict[str, Any],
    *,
    closure: tuple[Any, ...] | None = None,
    name: str | None = None,
) -> FunctionType:
    return FunctionType(code, globals_, name or code.co_name, None, closure)
