"""The backend registry: ``backend(gm, example_inputs) -> callable``, by name.

One registry for every danlu package. It holds *factories*, ``factory(mode=None,
options=None) -> backend``, so a backend with settings (danlu's "inductor") is built for the
settings of each compile; a plain backend is registered as a factory that ignores them. This
package registers "eager" (run the captured graph as it is); the danlu umbrella package
registers its own "eager", "aot_eager" and "inductor" over it, loads the ``danlu.backends``
entry points and checks modes and options before it asks here (``danlu.backends``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

Backend = Callable[..., Callable]
_REGISTRY: dict[str, Callable[..., Backend]] = {}


def eager(gm, example_inputs):
    """Run the captured graph as is (through ``GraphModule.forward``)."""
    return gm.forward


def _takes_settings(fn) -> bool:
    try:
        return "mode" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or an object without a signature
        return False


def register_backend(name: str, factory: Callable | None = None):
    """Register under ``name`` a factory ``(mode=None, options=None) -> backend`` or a plain
    backend ``(gm, example_inputs) -> callable``; usable as a decorator."""

    def add(fn):
        _REGISTRY[name] = fn if _takes_settings(fn) else (lambda mode=None, options=None: fn)
        return fn

    return add(factory) if factory is not None else add


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def is_registered(name: str) -> bool:
    return name in _REGISTRY


def lookup_backend(backend, mode=None, options=None) -> Backend:
    """A callable as it is; a name through its factory (with ``mode`` and ``options``)."""
    if callable(backend):
        return backend
    if isinstance(backend, str):
        factory = _REGISTRY.get(backend)
        if factory is None:
            raise ValueError(f"unknown backend {backend!r}; known: {', '.join(registered_names())}")
        return factory(mode=mode, options=options)
    raise TypeError(f"backend must be a callable or a name, got {type(backend).__name__}")


register_backend("eager", eager)
