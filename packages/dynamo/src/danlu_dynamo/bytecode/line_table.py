"""The 3.11+ location table (`co_linetable`): encode per-instruction source positions.

Decoding is `code.co_positions()`. Encoding follows the compiler's choice of entry forms, so a
round trip of unchanged code gives the same bytes. An entry covers 1-8 code units; its first
byte is `0x80 | form << 3 | (units - 1)`. Forms: 0-9 short (same line, small columns),
10-12 one-line (line delta 0-2, columns < 128), 13 line only, 14 long, 15 no location.
Line numbers are stored as deltas from the previous entry's line, starting at co_firstlineno.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from .instruction import Positions

_SHORT_MAX = 9
_ONE_LINE = 10
_NO_COLUMNS = 13
_LONG = 14
_NONE = 15


def _varint(out: bytearray, value: int) -> None:
    while value >= 64:
        out.append(0x40 | (value & 0x3F))
        value >>= 6
    out.append(value)


def _signed_varint(out: bytearray, value: int) -> None:
    _varint(out, ((-value) << 1) | 1 if value < 0 else value << 1)


def _entry(out: bytearray, pos: Positions, units: int, prev_line: int) -> int:
    """Write one entry covering `units` (1..8) code units; return the new previous line."""
    line, end_line, col, end_col = pos
    if line is None:
        out.append(0x80 | (_NONE << 3) | (units - 1))
        return prev_line
    if end_line is not None and end_line < line:
        raise ValueError(f"source span ends (line {end_line}) before it starts (line {line})")
    delta = line - prev_line
    col = -1 if col is None else col
    end_col = -1 if end_col is None else end_col
    end_line = -1 if end_line is None else end_line
    if col < 0 or end_col < 0:
        if end_line == line or end_line < 0:
            out.append(0x80 | (_NO_COLUMNS << 3) | (units - 1))
            _signed_varint(out, delta)
            return line
    elif end_line == line:
        if delta == 0 and col < 80 and 0 <= end_col - col < 16:
            out.append(0x80 | ((col >> 3) << 3) | (units - 1))
            out.append(((col & 7) << 4) | (end_col - col))
            return line
        if 0 <= delta < 3 and col < 128 and end_col < 128:
            out.append(0x80 | ((_ONE_LINE + delta) << 3) | (units - 1))
            out.append(col)
            out.append(end_col)
            return line
    out.append(0x80 | (_LONG << 3) | (units - 1))
    _signed_varint(out, delta)
    _varint(out, end_line - line if end_line >= 0 else 0)
    _varint(out, col + 1)
    _varint(out, end_col + 1)
    return line


# 3.12+ compilers let consecutive instructions with equal positions share entries; 3.11 writes
# one entry (or more) per instruction.
_MERGE_EQUAL = sys.version_info >= (3, 12)


def encode_line_table(spans: Iterable[tuple[Positions, int]], first_lineno: int) -> bytes:
    """Encode (positions, size in code units) pairs, one per instruction, in code order."""
    out = bytearray()
    prev_line = first_lineno
    pending: Positions | None = None
    pending_units = 0
    for pos, units in spans:
        if _MERGE_EQUAL and pending is not None and pos == pending:
            pending_units += units
            continue
        if pending is not None:
            prev_line = _flush(out, pending, pending_units, prev_line)
        pending, pending_units = pos, units
    if pending is not None:
        _flush(out, pending, pending_units, prev_line)
    return bytes(out)


def _flush(out: bytearray, pos: Positions, units: int, prev_line: int) -> int:
    while units > 8:
        prev_line = _entry(out, pos, 8, prev_line)
        units -= 8
    if units:
        prev_line = _entry(out, pos, units, prev_line)
    return prev_line
