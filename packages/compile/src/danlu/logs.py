"""`DANLU_LOGS=graph_breaks,recompiles,guards,output_code,perf,dynamic,ddp,cache`: turn on topic
loggers.

Each topic maps to the loggers of the packages that report it; enabling a topic sets those
loggers to DEBUG and attaches one stderr handler to each. danlu itself reports what the graph
compilers received and made (`danlu.graph`, `danlu.output_code`, `danlu.fallbacks`) and the
compile times (`danlu.perf`).
"""

from __future__ import annotations

import logging

TOPICS: dict[str, tuple[str, ...]] = {
    "graph_breaks": ("danlu_dynamo.graph_breaks",),
    "recompiles": ("danlu_dynamo.recompiles",),
    "guards": ("danlu_dynamo.guards",),
    "graph": ("danlu_dynamo.graph", "danlu.graph"),
    "output_code": ("danlu.output_code",),
    "perf": ("danlu.perf",),
    "fallbacks": ("danlu.fallbacks",),
    "dynamic": ("danlu_primtorch.symbolic",),
    "ddp": ("danlu_dynamo.ddp",),
    "cache": ("danlu.cache",),
}
"""Topic -> the loggers that report it. Each logger serves one topic only, so enabling a topic
sets its loggers to DEBUG (danlu-dynamo writes guards at DEBUG)."""

_handler: logging.Handler | None = None
_enabled: set[str] = set()


def parse(spec: str) -> list[str]:
    names = [t.strip() for t in spec.replace(" ", ",").split(",") if t.strip()]
    if "all" in names:
        return sorted(TOPICS)
    unknown = [n for n in names if n not in TOPICS]
    if unknown:
        raise ValueError(
            f"unknown DANLU_LOGS topic(s) {unknown}; valid topics: {', '.join(sorted(TOPICS))}, all"
        )
    return names


def configure(spec: str) -> list[str]:
    """Enable exactly the topics named in `spec` (comma separated); returns them."""
    global _handler
    topics = parse(spec)
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    for topic in _enabled - set(topics):
        for name in TOPICS[topic]:
            logger = logging.getLogger(name)
            logger.setLevel(logging.NOTSET)
            if _handler in logger.handlers:
                logger.removeHandler(_handler)
    for topic in topics:
        for name in TOPICS[topic]:
            logger = logging.getLogger(name)
            logger.setLevel(logging.DEBUG)
            if _handler not in logger.handlers:
                logger.addHandler(_handler)
            logger.propagate = False
    _enabled.clear()
    _enabled.update(topics)
    return topics


perf_log = logging.getLogger("danlu.perf")
graph_log = logging.getLogger("danlu.graph")
output_code_log = logging.getLogger("danlu.output_code")
fallbacks_log = logging.getLogger("danlu.fallbacks")
