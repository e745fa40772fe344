"""Buffers a CPU graph keeps from one call to the next (its workspace).

A C++ graph's intermediate buffers used to be allocated on every call and freed by its end.
Multi-megabyte allocations come from fresh mappings of the C allocator, so each call paid the
page faults of writing them again: ConvNeXt-atto's inference (batch 2) spent about a fifth of
its call there, and the same kernel took 0.8 ms writing a fresh buffer against 0.5 ms writing
one already mapped. A buffer that stays inside the call keeps its tensor in a dict of the
compiled graph instead, allocated on the first call.

What may be kept: a buffer allocated by the wrapper (not a library kernel's result) whose
sizes are static, and which never leaves the call. It leaves when any name it is handed on to
(reused as, written in place as) is a graph output or the base of one, or is read by a library
call that may return a view of it (only convolutions and matmuls are known to return tensors
of their own). A call made while another is running (another thread, or recursion) gets
buffers of its own. ``DANLU_CPU_WORKSPACE=0`` turns this off. The cost is memory: the kept
buffers stay allocated between calls (at most the graph's peak of intermediates).
"""

from __future__ import annotations

import os


def enabled() -> bool:
    return os.environ.get("DANLU_CPU_WORKSPACE", "1") != "0"


class Workspace:
    """Tracks, while the wrapper is generated, which allocations could be kept, then rewrites
    their lines (``apply``)."""

    def __init__(self):
        self.allocated: dict[str, int] = {}  # buffer name -> index of its allocation line
        self.root: dict[str, str] = {}  # every name a buffer is handed on to -> its allocation
        self.leaves: set[str] = set()  # allocations whose tensor leaves the call

    def allocate(self, name: str, line_index: int):
        self.allocated[name] = line_index
        self.root[name] = name

    def hand_on(self, new: str, old: str):
        """``new`` is the tensor ``old`` was (a reuse, or a write in place)."""
        self.root[new] = self.root.get(old, old)

    def escapes(self, names):
        for n in names:
            self.leaves.add(self.root.get(n, n))

    def apply(self, body: list[str]) -> tuple[list[str], list[str]]:
        """``body`` with the kept allocations read from ``_ws`` (allocated there on the first
        call), and the names kept."""
        kept = [n for n in self.allocated if n not in self.leaves]
        rewrite = {self.allocated[n]: n for n in kept}
        out = []
        for i, line in enumerate(body):
            name = rewrite.get(i)
            if name is None:
                out.append(line)
                continue
            alloc = line.split(" = ", 1)[1]
            out.append(f"{name} = _ws.get('{name}')")
            out.append(f"if {name} is None: {name} = _ws['{name}'] = {alloc}")
        return out, kept


def call_with_workspace(body_lines: list[str]) -> list[str]:
    """``make_call``'s inner functions for a graph with kept buffers: ``call`` runs ``_run``
    with the graph's workspace, or with a fresh one while another call holds it."""
    return [
        "    _ws_kept = {}",
        "    _ws_lock = threading.Lock()",
        "",
        "    def call(args):",
        "        if not _ws_lock.acquire(False):  # a call is running: buffers of its own",
        "            return _run(args, {})",
        "        try:",
        "            return _run(args, _ws_kept)",
        "        finally:",
        "            _ws_lock.release()",
        "",
        "    def _run(args, _ws):",
        *body_lines,
    ]
