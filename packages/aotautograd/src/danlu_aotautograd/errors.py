"""Errors raised when a program cannot be traced or compiled ahead of time."""

from __future__ import annotations


class AotNotSupported(RuntimeError):
    """The program uses something danlu_aotautograd cannot trace or functionalize.

    ``aot_function`` raises it; ``aot_backend`` catches it and runs the graph eagerly instead.
    """
