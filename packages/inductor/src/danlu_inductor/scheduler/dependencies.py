"""Dependency extraction: which buffers a loop body reads, and at which indices.

The body is run under a handler that records every ``ops.load(name, index)``; indices are
sympy expressions of the node's own loop variables (``x*`` kept dims, ``r*`` reduced dims).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from danlu_inductor.ir.ops import ALL_OPS, V


@dataclass(frozen=True)
class MemoryDep:
    name: str
    index: sympy.Expr
    indirect: bool = False  # index holds a value loaded at run time (gathers)


class DepsRecorder:
    def __init__(self):
        self.reads: list[MemoryDep] = []
        self._n = 0
        self.indirect = set()

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(name)

        def op(*args):
            if name == "load":
                idx = args[1]
                ind = (
                    bool(idx.free_symbols & self.indirect)
                    if hasattr(idx, "free_symbols")
                    else False
                )
                self.reads.append(MemoryDep(args[0], idx, ind))
            if name == "indirect_indexing":
                self._n += 1
                s = sympy.Symbol(f"indirect{self._n}", integer=True)
                self.indirect.add(s)
                return s
            return name

        return op


def record_reads(fn, *args) -> list[MemoryDep]:
    rec = DepsRecorder()
    with V.set_handler(rec):
        fn(*args)
    return rec.reads
