"""Large synthetic code: opargs over 255 and 65535, jumps needing two EXTENDED_ARG prefixes,
and local slots renumbered so that 3.13 paired-local instructions must be split."""

from __future__ import annotations

import types

from danlu_dynamo.bytecode import CodeTables, assemble, disassemble
from danlu_dynamo.bytecode.opcodes import EXTENDED_ARG


def _compile_function(source: str, name: str) -> types.FunctionType:
    namespace: dict = {}
    exec(compile(source, f"<synthetic {name}>", "exec"), namespace)
    return namespace[name]


def _prefix_runs(co_code: bytes) -> int:
    """Longest run of EXTENDED_ARG prefixes in a code string."""
    best = run = 0
    for op in co_code[::2]:
        run = run + 1 if op == EXTENDED_ARG else 0
        best = max(best, run)
    return best


def test_many_locals_constants_and_names_round_trip():
    n = 400
    lines = ["def wide(seed):"]
    lines += [f"    v{i} = seed + {i * 7 + 0.5}" for i in range(n)]  # 400 locals and floats
    lines += [f"    g{i} = glob_{i % 300} if seed > 1e9 else v{i}" for i in range(n)]  # 300 names
    lines.append("    return " + " + ".join(f"g{i}" for i in range(0, n, 7)))
    fn = _compile_function("\n".join(lines), "wide")
    code = fn.__code__
    assert len(code.co_varnames) > 256 and len(code.co_consts) > 256 and len(code.co_names) > 256
    new = assemble(disassemble(code), template=code)
    assert new.co_code == code.co_code
    assert new.co_linetable == code.co_linetable
    assert new.co_stacksize == code.co_stacksize
    fn2 = types.FunctionType(new, fn.__globals__, "wide")
    assert fn2(3) == fn(3)


def _long_jump_source(count: int) -> str:
    body = "\n".join(f"        a = a + {i % 5}" for i in range(count))
    return (
        "def far(x):\n"
        "    a = 0\n"
        "    for _ in range(x):\n"
        "        if x < 0:\n"
        "            raise ValueError\n"
        f"{body}\n"
        "        try:\n"
        "            a = a // (x - 2)\n"
        "        except ZeroDivisionError:\n"
        "            a = -a\n"
        "    return a\n"
    )


def test_jumps_needing_two_extended_args_round_trip_and_run():
    fn = _compile_function(_long_jump_source(16000), "far")
    code = fn.__code__
    assert len(code.co_code) > 2 * 65536  # the loop's backward jump spans > 65535 units
    assert _prefix_runs(code.co_code) >= 2
    new = assemble(disassemble(code), template=code)
    assert new.co_code == code.co_code
    assert new.co_exceptiontable == code.co_exceptiontable
    assert list(new.co_positions()) == list(code.co_positions())
    fn2 = types.FunctionType(new, fn.__globals__, "far")
    for x in (0, 1, 2, 3):
        assert fn2(x) == fn(x)


def test_renumbered_locals_split_paired_loads():
    """Reverse co_varnames of a function with 20 locals: every local moves; on 3.13 the
    LOAD_FAST_LOAD_FAST/STORE_FAST_STORE_FAST pairs no longer fit in 4 bits and are split."""
    lines = ["def pairs():"]
    lines += [f"    v{i} = {i}" for i in range(20)]
    lines += ["    v0, v1 = v1, v0", "    v2, v19 = v19, v2"]
    lines.append("    return [" + ", ".join(f"v{i} * v{(i + 1) % 20}" for i in range(20)) + "]")
    fn = _compile_function("\n".join(lines), "pairs")
    code = fn.__code__
    tables = CodeTables.from_code(code)
    tables.varnames = list(reversed(tables.varnames))
    new = assemble(disassemble(code), template=code, tables=tables)
    assert new.co_varnames == tuple(reversed(code.co_varnames))
    original_pairs = [
        i for i in disassemble(code) if "_FAST_" in i.opname and "CHECK" not in i.opname
    ]
    new_pairs = [i for i in disassemble(new) if "_FAST_" in i.opname and "CHECK" not in i.opname]
    if original_pairs:  # 3.13
        assert len(new_pairs) < len(original_pairs)
    assert types.FunctionType(new, fn.__globals__, "pairs")() == fn()
