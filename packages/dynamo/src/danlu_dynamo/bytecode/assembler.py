"""List of `Instruction`s -> a valid code object.

Steps: resolve table opargs (constants, names, locals) from `argval`; split 3.13 paired-local
super-instructions whose slots no longer fit in 4 bits; point each jump the right way;
lay out offsets and jump opargs until the EXTENDED_ARG prefixes stop changing; emit the code
units (with zeroed CACHE entries); encode the exception and location tables; compute the
stack size.
"""

from __future__ import annotations

from types import CodeType
from typing import Any

from . import opcodes
from .code_tables import CodeTables
from .editing import replace_instructions
from .exception_table import RawExceptionEntry, encode_exception_table
from .instruction import Instruction
from .line_table import encode_line_table
from .stack_depth import max_stack_depth


class AssemblyError(ValueError):
    pass


def assemble(
    instructions: list[Instruction],
    *,
    template: CodeType,
    tables: CodeTables | None = None,
    **code_replace_overrides: Any,
) -> CodeType:
    """Build a code object from `instructions`, taking everything else from `template`.

    `tables` holds co_consts/co_names/co_varnames/co_cellvars/co_freevars (default: the
    template's); entries that the instructions need and that are missing are appended.
    `code_replace_overrides` go to `CodeType.replace` last (e.g. co_name, co_argcount,
    co_flags, co_firstlineno, co_qualname). Opargs and opcodes of the given instructions are
    updated in place; the list itself may gain instructions (split super-instructions).
    """
    if tables is None:
        tables = CodeTables.from_code(template)
    _resolve_table_args(instructions, tables)
    _split_oversized_pairs(instructions, tables)
    _check_required_successors(instructions)
    _orient_jumps(instructions)
    offsets = _layout(instructions)
    code_bytes = _emit(instructions, offsets)
    first_lineno = code_replace_overrides.get("co_firstlineno", template.co_firstlineno)
    sizes = [(offsets[i + 1] - offsets[i]) // 2 for i in range(len(instructions))]
    linetable = encode_line_table(
        ((ins.positions, size) for ins, size in zip(instructions, sizes)), first_lineno
    )
    exceptiontable = encode_exception_table(_exception_ranges(instructions, offsets))
    stacksize = max_stack_depth(instructions)
    args: dict[str, Any] = dict(tables.code_replace_args())
    args.update(
        co_code=code_bytes,
        co_linetable=linetable,
        co_exceptiontable=exceptiontable,
        co_stacksize=stacksize,
    )
    args.update(code_replace_overrides)
    return template.replace(**args)


# -- opargs ------------------------------------------------------------------------------------


def _resolve_table_args(instructions: list[Instruction], tables: CodeTables) -> None:
    # New plain locals first: cell and free variable slots come after every plain local, so
    # a deref index resolved before a later new local was appended would point at that local.
    for ins in instructions:
        if ins.opcode in opcodes.PAIRED_LOCAL_OPS:
            for name in ins.argval:
                tables.local_index(name)
        elif ins.opcode in opcodes.LOCAL_OPS:
            tables.local_index(ins.argval)
    for ins in instructions:
        op = ins.opcode
        if op in opcodes.JUMP_OPS:
            if ins.target is None:
                raise AssemblyError(f"{ins!r} has no target")
            continue
        arg = ins.arg
        if op in opcodes.CONST_OPS:
            ins.arg = tables.const_index(ins.argval, hint=arg)
        elif op in opcodes.NAME_OPS:
            shift = opcodes.NAME_SHIFT.get(op, 0)
            flags = (arg or 0) & ((1 << shift) - 1)
            hint = None if arg is None else arg >> shift
            ins.arg = (tables.name_index(ins.argval, hint=hint) << shift) | flags
        elif op in opcodes.PAIRED_LOCAL_OPS:
            first, second = ins.argval
            hint1, hint2 = (None, None) if arg is None else (arg >> 4, arg & 15)
            ins.arg = (tables.local_index(first, hint=hint1) << 4) | tables.local_index(
                second, hint=hint2
            )
        elif op in opcodes.LOCAL_OPS:
            ins.arg = tables.local_index(ins.argval, hint=arg)
        elif op in opcodes.FREE_OPS:
            ins.arg = tables.local_index(ins.argval, create=False, hint=arg, deref=True)
        elif op in opcodes.COMPARE_OPS and arg is None:
            ins.arg = opcodes.compare_arg(ins.argval)
        elif arg is None:
            if op not in opcodes.HAS_ARG:
                ins.arg = 0
            elif isinstance(ins.argval, int):
                ins.arg = ins.argval
            else:
                raise AssemblyError(f"cannot derive the oparg of {ins!r} from its argval")


def _split_oversized_pairs(instructions: list[Instruction], tables: CodeTables) -> None:
    """3.13 LOAD_FAST_LOAD_FAST & co. pack two slots in 4 bits each; split when they don't fit."""
    replacements: dict[int, list[Instruction]] = {}
    for ins in instructions:
        if ins.opcode in opcodes.PAIRED_LOCAL_OPS and ins.arg > 0xFF:
            parts = []
            for opname, var in zip(opcodes.PAIRED_LOCAL_PARTS[ins.opname], ins.argval):
                parts.append(
                    Instruction(
                        opname=opname,
                        opcode=opcodes.OPMAP[opname],
                        arg=tables.local_index(var),
                        argval=var,
                        positions=ins.positions,
                    )
                )
            replacements[id(ins)] = parts
    replace_instructions(instructions, replacements)


def _check_required_successors(instructions: list[Instruction]) -> None:
    required = opcodes.REQUIRED_SUCCESSOR
    for ins, nxt in zip(instructions, instructions[1:] + [None]):
        want = required.get(ins.opname)
        if want is not None and (nxt is None or nxt.opname != want):
            got = nxt.opname if nxt is not None else "the end of the code"
            raise AssemblyError(
                f"{ins!r} must be followed directly by {want}, not {got} "
                "(the interpreter reads or skips the next instruction)"
            )


def _orient_jumps(instructions: list[Instruction]) -> None:
    """Relative jumps encode a direction in the opcode; make it match the target's position."""
    _expand_backward_conditionals(instructions)
    index = {id(ins): i for i, ins in enumerate(instructions)}
    for i, ins in enumerate(instructions):
        if ins.opcode not in opcodes.JUMP_OPS or ins.opcode in opcodes.ABSOLUTE_JUMP_OPS:
            continue
        backward = index[id(ins.target)] <= i
        if backward != (ins.opcode in opcodes.BACKWARD_JUMP_OPS):
            twin = opcodes.JUMP_DIRECTION_TWIN.get(ins.opname)
            if twin is None:
                way = "backward" if backward else "forward"
                raise AssemblyError(f"{ins!r} cannot jump {way} on this Python version")
            ins.opname, ins.opcode = twin, opcodes.OPMAP[twin]


def _expand_backward_conditionals(instructions: list[Instruction]) -> None:
    """On 3.12+, `POP_JUMP_IF_X back` becomes `POP_JUMP_IF_not_X next; JUMP_BACKWARD back`."""
    index = {id(ins): i for i, ins in enumerate(instructions)}
    replacements: dict[int, list[Instruction]] = {}
    for i, ins in enumerate(instructions):
        if ins.opcode not in opcodes.JUMP_OPS:
            continue
        if id(ins.target) not in index:
            raise AssemblyError(f"{ins!r} jumps to an instruction not in the list")
        inverse = opcodes.CONDITIONAL_INVERSE.get(ins.opname)
        if inverse is None or index[id(ins.target)] > i:
            continue
        if i + 1 == len(instructions):
            raise AssemblyError(f"{ins!r} is last: control would fall off the end")
        replacements[id(ins)] = [
            Instruction(
                opname=inverse,
                opcode=opcodes.OPMAP[inverse],
                target=instructions[i + 1],
                positions=ins.positions,
            ),
            Instruction(
                opname="JUMP_BACKWARD",
                opcode=opcodes.OPMAP["JUMP_BACKWARD"],
                target=ins.target,
                positions=ins.positions,
            ),
        ]
    replace_instructions(instructions, replacements)


# -- layout ------------------------------------------------------------------------------------


def _prefix_units(arg: int) -> int:
    """How many EXTENDED_ARG prefixes an oparg needs."""
    if arg < 0:
        raise AssemblyError(f"negative oparg {arg}")
    n = 0
    while arg > 0xFF:
        arg >>= 8
        n += 1
    return n


def _layout(instructions: list[Instruction]) -> list[int]:
    """Byte offset of each instruction's first code unit (EXTENDED_ARGs included), plus the end.

    Jump opargs depend on offsets and offsets on the opargs' sizes, so iterate to a fixed
    point; sizes only grow, so this terminates.
    """
    index = {id(ins): i for i, ins in enumerate(instructions)}
    jump_ops = opcodes.JUMP_OPS
    prefixes = [0] * len(instructions)
    base_units = [1 + opcodes.CACHE_ENTRIES.get(ins.opcode, 0) for ins in instructions]
    jumps = [i for i, ins in enumerate(instructions) if ins.opcode in jump_ops]
    for i, ins in enumerate(instructions):
        if ins.opcode in jump_ops:
            prefixes[i] = ins.min_extended_args
        elif not 0 <= ins.arg <= 0xFF:
            prefixes[i] = _prefix_units(ins.arg)
    while True:
        offsets = [0] * (len(instructions) + 1)
        pos = 0
        for i, units in enumerate(base_units):
            offsets[i] = pos
            pos += 2 * (prefixes[i] + units)
        offsets[-1] = pos
        changed = False
        for i in jumps:
            ins = instructions[i]
            op = ins.opcode
            target_offset = offsets[index[id(ins.target)]]
            if op in opcodes.ABSOLUTE_JUMP_OPS:
                arg = target_offset // 2
            else:
                after = offsets[i] + 2 * (prefixes[i] + base_units[i])
                delta = target_offset - after
                arg = (-delta if op in opcodes.BACKWARD_JUMP_OPS else delta) // 2
                if arg < 0:
                    raise AssemblyError(f"{ins!r} cannot reach its target (oparg {arg})")
            ins.arg = arg
            need = _prefix_units(arg)
            if need > prefixes[i]:
                prefixes[i] = need
                changed = True
        if not changed:
            return offsets


def _emit(instructions: list[Instruction], offsets: list[int]) -> bytes:
    out = bytearray()
    ext = opcodes.EXTENDED_ARG
    caches = opcodes.CACHE_ENTRIES
    for i, ins in enumerate(instructions):
        arg = ins.arg or 0
        n_cache = caches.get(ins.opcode, 0)
        n_prefix = (offsets[i + 1] - offsets[i]) // 2 - 1 - n_cache
        for k in range(n_prefix, 0, -1):
            out.append(ext)
            out.append((arg >> (8 * k)) & 0xFF)
        out.append(ins.opcode)
        out.append(arg & 0xFF)
        if n_cache:
            out.extend(bytes(2 * n_cache))  # CACHE is opcode 0, oparg 0
    return bytes(out)


def _exception_ranges(
    instructions: list[Instruction], offsets: list[int]
) -> list[RawExceptionEntry]:
    """Consecutive instructions with the same handler form one table entry."""
    index = {id(ins): i for i, ins in enumerate(instructions)}
    entries: list[RawExceptionEntry] = []
    current = None
    start = 0
    for i, ins in enumerate(instructions + [None]):
        entry = ins.exn_entry if ins is not None else None
        key = entry.handler_key() if entry is not None else None
        cur_key = current.handler_key() if current is not None else None
        if key == cur_key:
            continue
        if current is not None:
            if id(current.target) not in index:
                raise AssemblyError(f"exception handler {current!r} is not in the list")
            entries.append(
                RawExceptionEntry(
                    start,
                    offsets[i],
                    offsets[index[id(current.target)]],
                    current.depth,
                    current.lasti,
                )
            )
        current = entry
        start = offsets[i]
    return entries
