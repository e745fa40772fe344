"""Backends: ``backend(gm, example_inputs) -> callable``."""

from __future__ import annotations


def eager(gm, example_inputs):
    """Run the captured graph as is (through ``GraphModule.forward``)."""
    return gm.forward


_REGISTRY = {"eager": eager}


def register_backend(name: str, fn):
    _REGISTRY[name] = fn
    return fn


def lookup_backend(backend):
    if callable(backend):
        return backend
    if isinstance(backend, str):
        try:
            return _REGISTRY[backend]
        except KeyError:
            raise ValueError(f"unknown backend {backend!r}; known: {sorted(_REGISTRY)}") from None
    raise TypeError(f"backend must be a callable or a name, got {type(backend).__name__}")
