"""danlu.compile(model): one line that makes PyTorch training and inference faster."""

__version__ = "0.2.0.dev0"

from .backends import list_backends, lookup_backend, register_backend  # noqa: E402
from .compile import OptimizedModule, compile  # noqa: E402
from .config import config  # noqa: E402
from .report import Report, report  # noqa: E402
from .stats import CompileStats  # noqa: E402


def explain(fn):
    """`danlu.explain(fn)(*args)`: graphs, ops per graph, graph breaks with reasons and the
    user's file:line, guards and capture time, without keeping anything compiled."""
    import danlu_dynamo

    return danlu_dynamo.explain(fn)


def mark_dynamic(t, dim) -> None:
    """Make dimension `dim` (an int or a list) of tensor `t` symbolic when a compiled function
    is called with it (see `danlu.compile(..., dynamic=)`)."""
    import danlu_dynamo

    danlu_dynamo.mark_dynamic(t, dim)


def mark_static(t, dim=None) -> None:
    """Keep dimension `dim` (an int, a list, or None for all) of tensor `t` static."""
    import danlu_dynamo

    danlu_dynamo.mark_static(t, dim)


def save_cache_artifacts(path: str | None = None) -> bytes:
    """The graph-cache entries this process used, as one bundle (bytes; also written to
    `path`): `load_cache_artifacts` installs them on another machine (see `danlu.cache`)."""
    from .cache import save_cache_artifacts as save

    return save(path)


def load_cache_artifacts(data) -> list:
    """Install a bundle from `save_cache_artifacts` (bytes or a path) into the graph cache;
    returns the keys installed. Load bundles only from a source you trust: they hold the code
    danlu compiled the graphs to."""
    from .cache import load_cache_artifacts as load

    return load(data)


def reset() -> None:
    """Forget every compiled function: caches, guards and counters."""
    import danlu_dynamo

    danlu_dynamo.reset()
    CompileStats.current().clear()


if config.logs:
    config.logs = config.logs  # parse DANLU_LOGS at import so a typo fails loudly

__all__ = [
    "CompileStats",
    "OptimizedModule",
    "Report",
    "compile",
    "config",
    "explain",
    "list_backends",
    "load_cache_artifacts",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "register_backend",
    "report",
    "reset",
    "save_cache_artifacts",
]
