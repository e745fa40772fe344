"""The whole-graph cache: a captured graph's compiled form, kept on disk and loaded when the
same graph is captured again (this process after `danlu.reset()`, or a new one), so a warm
start skips aotautograd and inductor and loads the kernels.

- The key (`key.py`) covers the graph's code, the inputs' metadata, the graph's constants, the
  backend and its settings, the grad/autocast state and the versions of everything involved.
  Graphs with symbolic sizes are not cached.
- An entry (`store.py`) holds the partitioned program as plain data (danlu_aotautograd's
  `program_artifact`) with each compiled graph's wrapper and kernel sources (danlu_inductor's
  `graph_artifact`); constant tensors as raw bytes. Nothing is unpickled.
- `DANLU_LOGS=cache` says hit or miss per graph, and on a miss which key components differ
  from the nearest entry.
- `save_cache_artifacts()` / `load_cache_artifacts()` move the entries this process used to
  another machine, in a plain versioned bundle (`bundle.py`).
"""

from __future__ import annotations

import logging
import os

from .key import graph_key
from .store import EntryError, GraphStore

log = logging.getLogger("danlu.cache")

_STORES: dict = {}
USED: set[str] = set()  # keys this process loaded or wrote (what a bundle exports)


def cache_root() -> str:
    from ..config import config

    base = config.cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "danlu")
    return os.path.join(base, "graphs")


def graph_store() -> GraphStore | None:
    """The configured store, or None when the graph cache is off."""
    from ..config import config

    if not config.graph_cache:
        return None
    root = cache_root()
    store = _STORES.get(root)
    if store is None:
        try:
            store = _STORES[root] = GraphStore(root, config.graph_cache_max_bytes)
        except OSError as e:
            log.info("graph cache unavailable at %s: %s", root, e)
            return None
    store.max_bytes = config.graph_cache_max_bytes
    return store


def explain_miss(store: GraphStore, components: dict) -> str:
    """Which key components differ from the nearest entry (the fewest differences)."""
    best = None
    for key, other in store.components().items():
        diff = sorted(k for k in components if other.get(k) != components[k])
        if best is None or len(diff) < len(best[1]):
            best = (key, diff)
    if best is None:
        return "the cache is empty"
    key, diff = best
    return f"nearest entry {key} differs in: {', '.join(diff) or 'nothing (being written?)'}"


class CachedBackend:
    """What a cacheable backend does around its compile: look the graph up, load it on a
    hit, describe and store it after a miss. Every failure here is a miss with a reason."""

    def __init__(self, name: str, settings: dict, load_graph, graph_artifact):
        self.name, self.settings = name, settings
        self.load_graph, self.graph_artifact = load_graph, graph_artifact

    def key(self, gm, example_inputs):
        try:
            return graph_key(gm, example_inputs, self.name, self.settings)
        except Exception as e:  # noqa: BLE001 - a key we cannot make is no cache
            log.info("graph cache: no key (%s: %s)", type(e).__name__, e)
            return None

    def load(self, store, key_info, gm, example_inputs, slow_path):
        """The runner for a hit, or None (the reason is logged)."""
        from danlu_aotautograd.runtime.artifacts import NotCacheable, cached_runner, load_program

        key, components = key_info
        try:
            entry, tensors = store.load(key)
        except FileNotFoundError:
            log.info("graph cache miss %s: %s", key, explain_miss(store, components))
            return None, None
        except EntryError as e:
            log.info("graph cache miss %s: entry unusable, removed (%s)", key, e)
            return None, None
        try:
            program = load_program(entry["program"], tensors, self.load_graph)
            runner = cached_runner(program, gm, example_inputs, slow_path)
        except (NotCacheable, EntryError, ValueError, KeyError, TypeError, AttributeError) as e:
            store.remove(key)
            log.info("graph cache miss %s: entry does not load, removed (%s)", key, e)
            return None, None
        USED.add(key)
        log.info("graph cache hit %s", key)
        return runner, program

    def save(self, store, key_info, compiled) -> None:
        from danlu_aotautograd.runtime.artifacts import NotCacheable, program_artifact

        key, components = key_info
        aot = getattr(getattr(compiled, "aot_module", None), "aot", None)
        programs = getattr(aot, "compiled", None) or []
        if len(programs) != 1:
            log.info("graph cache: %s not stored (%d compiled programs)", key, len(programs))
            return
        try:
            meta, tensors = program_artifact(programs[0], self.graph_artifact)
            wrote = store.save(key, components, meta, tensors)
        except Exception as e:  # noqa: BLE001 - not cacheable: compiled anyway, just not kept
            reason = str(e) if isinstance(e, NotCacheable) else f"{type(e).__name__}: {e}"
            log.info("graph cache: %s not stored (%s)", key, reason)
            return
        USED.add(key)
        log.info("graph cache: stored %s%s", key, "" if wrote else " (already there)")


from .bundle import load_cache_artifacts, save_cache_artifacts  # noqa: E402

__all__ = [
    "CachedBackend",
    "GraphStore",
    "cache_root",
    "graph_store",
    "load_cache_artifacts",
    "save_cache_artifacts",
]
