"""`danlu.config`: the settings a user may change, with their defaults and meaning.

Unknown names are an error that lists the valid ones, so a typo never passes silently.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, fields


@dataclass
class Config:
    # capture
    recompile_limit: int = 8
    """Compiled versions kept per function before it runs eagerly (one log line says why)."""
    # compile caches
    graph_cache: bool = field(
        default_factory=lambda: os.environ.get("DANLU_GRAPH_CACHE", "1") != "0"
    )
    """Keep each compiled graph on disk (partitioned graphs, kernels, wrapper) and load it when
    the same graph is captured again, in this process or another (`danlu.cache`)."""
    cache_dir: str | None = field(default_factory=lambda: os.environ.get("DANLU_CACHE_DIR"))
    """Root of danlu's caches (default ~/.cache/danlu): `graphs/` here, kernels under `inductor/`."""
    graph_cache_max_bytes: int = 2 << 30
    """The graph cache's size bound; the least recently used entries go first."""
    # reporting
    progress: bool = field(default_factory=lambda: os.environ.get("DANLU_PROGRESS", "1") != "0")
    """A compile that runs longer than 3 s shows one updating line on stderr (terminals only)."""
    report: str | None = field(default_factory=lambda: os.environ.get("DANLU_REPORT") or None)
    """Path of an HTML compile report written when the process exits (`danlu.report`)."""
    # debugging
    debug_dir: str | None = field(default_factory=lambda: os.environ.get("DANLU_DEBUG_DIR"))
    """Directory that receives every artefact of each compile (graphs, guards, loop IR, kernels)."""
    logs: str = field(default_factory=lambda: os.environ.get("DANLU_LOGS", ""))
    """Comma-separated log topics; see `danlu.logs.TOPICS`."""

    def __setattr__(self, name: str, value) -> None:
        if name not in {f.name for f in fields(self)}:
            raise AttributeError(
                f"danlu.config has no option {name!r}; valid options: {', '.join(self.names())}"
            )
        if name == "recompile_limit" and (not isinstance(value, int) or value < 1):
            raise ValueError(f"recompile_limit must be a positive int, got {value!r}")
        object.__setattr__(self, name, value)
        if name == "logs":
            from .logs import configure

            configure(value)
        elif name == "report" and value:
            _report_at_exit()
        elif name == "recompile_limit" and _applied_limit[0] is not None:
            apply_recompile_limit(value)

    @classmethod
    def names(cls) -> list[str]:
        return sorted(f.name for f in fields(cls))

    @contextlib.contextmanager
    def patch(self, **changes):
        """Temporarily change options: `with danlu.config.patch(recompile_limit=2): ...`."""
        old = {name: getattr(self, name) for name in changes}
        for name, value in changes.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in old.items():
                setattr(self, name, value)


_applied_limit: list = [None]
_report_registered: list = [False]


def _report_at_exit() -> None:
    """Write `config.report` when the process exits (registered once; the path is read then)."""
    if _report_registered[0]:
        return
    import atexit

    def write():
        from .report import write_configured_report

        write_configured_report()

    atexit.register(write)
    _report_registered[0] = True


def apply_recompile_limit(limit: int) -> None:
    """Hand `recompile_limit` to danlu-dynamo (both of its capture paths read
    `danlu_dynamo.config.recompile_limit`), with a C cache large enough to hold that many
    entries per code object."""
    from danlu_dynamo import config as dynamo_config
    from danlu_dynamo import eval_frame

    dynamo_config.recompile_limit = limit
    if eval_frame.get_cache_limit() < limit:
        eval_frame.set_cache_limit(limit)
    _applied_limit[0] = limit


config = Config()
