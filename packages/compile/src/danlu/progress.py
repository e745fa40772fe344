"""One updating line on stderr while a compile runs long.

When a graph's backend call (aotautograd + inductor) has run for ``AFTER_S`` seconds, a line
``[danlu] compiling graph 3 (12 so far): lowering, 7.4 s`` appears and is rewritten in place
every ``EVERY_S`` seconds until the call returns, when it is erased. Only on a terminal
(``stderr.isatty()``) and with ``danlu.config.progress`` on; nothing otherwise. The phase is
what the pipeline last announced through ``phase()``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

AFTER_S = 3.0
EVERY_S = 0.5

_state = threading.local()


def phase(name: str) -> None:
    """The pipeline's current phase (shown on the progress line)."""
    bar = getattr(_state, "bar", None)
    if bar is not None:
        bar.phase = name


class _Bar:
    def __init__(self, index: int, stream):
        self.index, self.stream = index, stream
        self.phase = "capture"
        self.start = time.perf_counter()
        self.shown = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="danlu-progress")

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        return f"[danlu] compiling graph {self.index}: {self.phase}, {elapsed:.1f} s"

    def _run(self):
        if self.done.wait(AFTER_S):
            return
        while not self.done.is_set():
            text = self.line()
            self.stream.write("\r" + text + " " * 8)
            self.stream.flush()
            self.shown = True
            self.done.wait(EVERY_S)

    def close(self):
        self.done.set()
        self.thread.join(timeout=1.0)
        if self.shown:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()


@contextlib.contextmanager
def progress(index: int, stream=None):
    """Show the progress line for graph ``index`` while the body runs (if it runs long)."""
    from .config import config

    stream = stream if stream is not None else sys.stderr
    enabled = config.progress and getattr(stream, "isatty", lambda: False)()
    if not enabled or getattr(_state, "bar", None) is not None:
        yield
        return
    bar = _Bar(index, stream)
    _state.bar = bar
    bar.thread.start()
    try:
        yield
    finally:
        _state.bar = None
        bar.close()
