"""Facts about the running interpreter's opcode set (CPython 3.11, 3.12, 3.13).

Everything version-specific that the rest of the bytecode layer needs is computed here once,
from the `dis`/`opcode` modules of the interpreter we run on, so other modules ask questions
("is this a jump?", "how many CACHE entries follow it?") instead of checking versions.
"""

from __future__ import annotations

import dis
import opcode as _opcode
import sys

PY_VERSION = sys.version_info[:2]
if not ((3, 11) <= PY_VERSION <= (3, 13)):
    raise ImportError(
        f"danlu_dynamo.bytecode supports CPython 3.11-3.13, not {sys.version.split()[0]}"
    )

# Real opcodes only: 3.12+ lists pseudo-instructions (SETUP_FINALLY, JUMP, ...) at >= 256;
# those never appear in a code object.
OPMAP: dict[str, int] = {name: op for name, op in dis.opmap.items() if op < 256}
OPNAME: dict[int, str] = {op: name for name, op in OPMAP.items()}
EXTENDED_ARG: int = dis.EXTENDED_ARG
HAVE_ARGUMENT: int = dis.HAVE_ARGUMENT
CACHE: int = OPMAP["CACHE"]
assert CACHE == 0, "the assembler writes CACHE entries as zero bytes"
# Opcodes that take an oparg (3.13's WITH_EXCEPT_START sits at HAVE_ARGUMENT yet takes none).
HAS_ARG: frozenset[int] = frozenset(
    op for op in (getattr(dis, "hasarg", None) or range(HAVE_ARGUMENT, 256)) if op in OPNAME
)


def _cache_entries(op: int) -> int:
    table = _opcode._inline_cache_entries
    if isinstance(table, dict):  # 3.13: keyed by opname
        return table.get(OPNAME[op], 0)
    return table[op]  # 3.11, 3.12: a list indexed by opcode


CACHE_ENTRIES: dict[int, int] = {op: _cache_entries(op) for op in OPNAME}

JUMP_OPS: frozenset[int] = frozenset(op for op in dis.hasjrel if op < 256) | frozenset(
    op for op in dis.hasjabs if op < 256
)
ABSOLUTE_JUMP_OPS: frozenset[int] = frozenset(op for op in dis.hasjabs if op < 256)
BACKWARD_JUMP_OPS: frozenset[int] = frozenset(
    op for op in JUMP_OPS if "JUMP_BACKWARD" in OPNAME[op]
)
CONST_OPS: frozenset[int] = frozenset(op for op in dis.hasconst if op < 256)
NAME_OPS: frozenset[int] = frozenset(op for op in dis.hasname if op < 256)
LOCAL_OPS: frozenset[int] = frozenset(op for op in dis.haslocal if op < 256)
FREE_OPS: frozenset[int] = frozenset(op for op in dis.hasfree if op < 256)
COMPARE_OPS: frozenset[int] = frozenset(op for op in dis.hascompare if op < 256)

# 3.13 super-instructions: two local indices packed as (first << 4) | second.
PAIRED_LOCAL_OPS: frozenset[int] = frozenset(
    OPMAP[n]
    for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST")
    if n in OPMAP
)
# The two plain instructions each super-instruction stands for.
PAIRED_LOCAL_PARTS: dict[str, tuple[str, str]] = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _name_shifts() -> dict[int, int]:
    """Name-table ops whose oparg carries flag bits below the name index."""
    shifts = {OPMAP["LOAD_GLOBAL"]: 1}  # 3.11+: low bit = push NULL first
    if PY_VERSION >= (3, 12):
        shifts[OPMAP["LOAD_ATTR"]] = 1  # low bit = method-style load (NULL|self)
        shifts[OPMAP["LOAD_SUPER_ATTR"]] = 2  # low bits = method load, two-arg super()
    return shifts


NAME_SHIFT: dict[int, int] = _name_shifts()

# COMPARE_OP: 3.11 oparg = index into dis.cmp_op; 3.12 = (index << 4) | mask;
# 3.13 = (index << 5) | (16 if the result is coerced to bool) | mask.
COMPARE_SHIFT = {(3, 11): 0, (3, 12): 4, (3, 13): 5}[PY_VERSION]
_COMPARE_MASK = {"<": 2, "<=": 10, "==": 8, "!=": 7, ">": 4, ">=": 12}


def compare_arg(op: str, *, to_bool: bool = False) -> int:
    """The COMPARE_OP oparg the compiler would emit for comparison `op`."""
    index = dis.cmp_op.index(op)
    if COMPARE_SHIFT == 0:
        return index
    arg = (index << COMPARE_SHIFT) | _COMPARE_MASK[op]
    if to_bool and PY_VERSION >= (3, 13):
        arg |= 16
    return arg


UNCONDITIONAL_JUMP_NAMES = frozenset(
    {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
)
# Instructions after which control never falls through to the next instruction.
TERMINATOR_NAMES = UNCONDITIONAL_JUMP_NAMES | {
    "RETURN_VALUE",
    "RETURN_CONST",
    "RAISE_VARARGS",
    "RERAISE",
}
TERMINATOR_OPS: frozenset[int] = frozenset(OPMAP[n] for n in TERMINATOR_NAMES if n in OPMAP)


def _direction_pairs() -> dict[str, str]:
    """Forward <-> backward twins, so a jump can follow its target when code moves."""
    pairs = {"JUMP_FORWARD": "JUMP_BACKWARD"}
    if PY_VERSION == (3, 11):
        for cond in ("FALSE", "TRUE", "NONE", "NOT_NONE"):
            pairs[f"POP_JUMP_FORWARD_IF_{cond}"] = f"POP_JUMP_BACKWARD_IF_{cond}"
    both = dict(pairs)
    both.update({b: f for f, b in pairs.items()})
    return both


JUMP_DIRECTION_TWIN: dict[str, str] = _direction_pairs()

# 3.12+ conditional jumps only go forward; a backward one is written as the inverse condition
# jumping over an unconditional JUMP_BACKWARD.
CONDITIONAL_INVERSE: dict[str, str] = (
    {
        "POP_JUMP_IF_FALSE": "POP_JUMP_IF_TRUE",
        "POP_JUMP_IF_TRUE": "POP_JUMP_IF_FALSE",
        "POP_JUMP_IF_NONE": "POP_JUMP_IF_NOT_NONE",
        "POP_JUMP_IF_NOT_NONE": "POP_JUMP_IF_NONE",
    }
    if PY_VERSION >= (3, 12)
    else {}
)

# Direction-free jump names accepted by create_instruction; the assembler picks the real opcode.
GENERIC_JUMPS: dict[str, tuple[str, str]] = {"JUMP": ("JUMP_FORWARD", "JUMP_BACKWARD")}
if PY_VERSION == (3, 11):
    for _cond in ("FALSE", "TRUE", "NONE", "NOT_NONE"):
        GENERIC_JUMPS[f"POP_JUMP_IF_{_cond}"] = (
            f"POP_JUMP_FORWARD_IF_{_cond}",
            f"POP_JUMP_BACKWARD_IF_{_cond}",
        )


_RETURN_GENERATOR = OPMAP["RETURN_GENERATOR"]


def stack_effect(op: int, arg: int | None, *, jump: bool | None = None) -> int:
    """Net stack change of one instruction (on the branch taken when `jump` is True)."""
    if op == _RETURN_GENERATOR and PY_VERSION < (3, 13):
        # A resumed generator finds the sent value on the stack (popped by the POP_TOP
        # that follows); 3.11/3.12's table says 0 because their compiler adds this
        # prologue after computing the stack size.
        return 1
    if op not in HAS_ARG:
        arg = None
    elif arg is None:
        arg = 0
    return dis.stack_effect(op, arg, jump=jump)


def is_jump(op: int) -> bool:
    return op in JUMP_OPS


def cache_entries(op: int) -> int:
    return CACHE_ENTRIES.get(op, 0)


def _fused_with_next() -> frozenset[str]:
    """Instructions whose successor must stay right after them: the interpreter reads or
    skips the next code unit (specialized PRECALL skips CALL; 3.11 COMPARE_OP*_JUMP reads the
    branch; a resumed generator inspects the RESUME after YIELD_VALUE; 3.13 FOR_ITER skips
    END_FOR *and* the POP_TOP after it; KW_NAMES feeds the next call)."""
    names = {"YIELD_VALUE", "RETURN_GENERATOR", "KW_NAMES"}
    if PY_VERSION == (3, 11):
        names |= {"PRECALL", "COMPARE_OP"}
    if PY_VERSION >= (3, 13):
        names |= {"END_FOR"}
    return frozenset(n for n in names if n in OPMAP)


# Never insert code between one of these and the instruction after it.
FUSED_WITH_NEXT: frozenset[str] = _fused_with_next()


def _required_successors() -> dict[str, str]:
    """Pairs the interpreter relies on; breaking them crashes it (checked by the assembler).
    3.11 specialized PRECALL skips the CALL after it; 3.13 FOR_ITER, when exhausted, skips the
    END_FOR at its target and the POP_TOP after that; generators resume at a RESUME."""
    pairs = {"YIELD_VALUE": "RESUME"}
    if PY_VERSION == (3, 11):
        pairs.update(PRECALL="CALL", KW_NAMES="PRECALL")
    elif PY_VERSION == (3, 12):
        pairs.update(KW_NAMES="CALL")
    else:
        pairs.update(END_FOR="POP_TOP")
    return pairs


REQUIRED_SUCCESSOR: dict[str, str] = _required_successors()
