"""Why a trace stopped."""

from __future__ import annotations


class Unsupported(Exception):
    """The interpreter met something it cannot trace; the caller breaks the graph here."""

    def __init__(self, reason: str, *, user_loc: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.user_loc = user_loc


class RestartWithBreak(Exception):
    """A nested (inlined) call failed: restart the frame's trace, breaking at `offset`."""

    def __init__(self, offset: int, reason: str, user_loc: str | None):
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.user_loc = user_loc


class GraphBreakError(RuntimeError):
    """Raised under ``fullgraph=True`` instead of breaking the graph."""


def unsupported(reason: str) -> Unsupported:
    return Unsupported(reason)
