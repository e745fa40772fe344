"""The 3.11+ exception table (`co_exceptiontable`): decode and encode.

Each entry is four numbers: start and length of the protected range and the handler offset
(all in code units), then `depth << 1 | lasti`. Numbers are written big-endian in 6-bit
chunks, bit 6 (0x40) meaning "more chunks follow"; bit 7 (0x80) marks an entry's first byte.
"""

from __future__ import annotations

from typing import NamedTuple

_MORE = 0x40
_ENTRY_START = 0x80


class RawExceptionEntry(NamedTuple):
    """One decoded entry, in byte offsets; `end` is exclusive."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    value = byte & 0x3F
    pos += 1
    while byte & _MORE:
        byte = data[pos]
        value = (value << 6) | (byte & 0x3F)
        pos += 1
    return value, pos


def _write_varint(out: bytearray, value: int, *, first: bool) -> None:
    if value < 0:
        raise ValueError(f"exception table values are unsigned, got {value}")
    chunks = [value & 0x3F]
    value >>= 6
    while value:
        chunks.append(value & 0x3F)
        value >>= 6
    chunks.reverse()
    for i, chunk in enumerate(chunks):
        byte = chunk
        if i + 1 < len(chunks):
            byte |= _MORE
        if first and i == 0:
            byte |= _ENTRY_START
        out.append(byte)


def parse_exception_table(table: bytes) -> list[RawExceptionEntry]:
    entries = []
    pos = 0
    while pos < len(table):
        start, pos = _read_varint(table, pos)
        length, pos = _read_varint(table, pos)
        target, pos = _read_varint(table, pos)
        depth_lasti, pos = _read_varint(table, pos)
        entries.append(
            RawExceptionEntry(
                start * 2, (start + length) * 2, target * 2, depth_lasti >> 1, bool(depth_lasti & 1)
            )
        )
    return entries


def encode_exception_table(entries: list[RawExceptionEntry]) -> bytes:
    out = bytearray()
    for entry in entries:
        if entry.end <= entry.start:
            raise ValueError(f"empty exception-table range {entry}")
        _write_varint(out, entry.start // 2, first=True)
        _write_varint(out, (entry.end - entry.start) // 2, first=False)
        _write_varint(out, entry.target // 2, first=False)
        _write_varint(out, (entry.depth << 1) | int(entry.lasti), first=False)
    return bytes(out)
