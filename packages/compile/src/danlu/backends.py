"""The backend registry: names that `danlu.compile(backend=...)` accepts.

A backend follows torch.compile's convention, `backend(gm, example_inputs) -> callable`.
Built in: "eager" (capture only), "aot_eager" (capture + ahead-of-time autograd, graphs run
as they are) and "inductor" (capture + aotautograd + danlu-inductor's generated kernels).
Other packages add backends with `register_backend` or through the `danlu.backends` entry-point
group (each entry point names a backend callable, or a factory taking `mode` and `options`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from importlib.metadata import entry_points

Backend = Callable[..., Callable]
_REGISTRY: dict[str, Callable[..., Backend]] = {}
MODES = (None, "default", "reduce-overhead", "max-autotune")


def register_backend(name: str, factory: Callable[..., Backend] | None = None):
    """Register `factory(mode=None, options=None) -> backend` under `name` (usable as decorator).

    A plain backend (a callable taking `(gm, example_inputs)`) may be registered directly.
    """

    def add(fn):
        params = list(inspect.signature(fn).parameters)
        _REGISTRY[name] = fn if "mode" in params else (lambda mode=None, options=None: fn)
        return fn

    return add(factory) if factory is not None else add


def _load_entry_points() -> None:
    for ep in entry_points(group="danlu.backends"):
        if ep.name not in _REGISTRY:
            register_backend(ep.name, ep.load())


def list_backends() -> list[str]:
    """Names of every registered backend."""
    _load_entry_points()
    return sorted(_REGISTRY)


def lookup_backend(backend, mode=None, options=None) -> Backend:
    """Resolve a name or callable to a backend, validating mode and options."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(map(repr, MODES))}")
    if callable(backend):
        if mode not in (None, "default") or options:
            raise ValueError("mode and options apply to named backends only, not to a callable")
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, not {type(backend).__name__}")
    _load_entry_points()
    if backend not in _REGISTRY:
        raise ValueError(
            f"unknown backend {backend!r}; valid backends: {', '.join(list_backends())}"
        )
    if backend != "inductor" and (mode not in (None, "default") or options):
        raise ValueError(f"mode and options are inductor settings; backend {backend!r} takes none")
    return _REGISTRY[backend](mode=mode, options=options)


@register_backend("eager")
def _eager(mode=None, options=None):
    from danlu_dynamo.backends import eager

    return eager


@register_backend("aot_eager")
def _aot_eager(mode=None, options=None):
    from danlu_aotautograd import aot_eager

    return aot_eager


@register_backend("inductor")
def _inductor(mode=None, options=None):
    import danlu_inductor
    from danlu_aotautograd import aot_backend
    from danlu_primtorch import decomposition_table

    settings = dict(options or {})
    if mode not in (None, "default"):
        settings["mode"] = mode
    validate = getattr(danlu_inductor, "validate_options", None)
    if validate is not None:
        validate(settings)
    elif settings:
        raise ValueError(f"danlu-inductor {danlu_inductor.__version__} accepts no options yet")

    from .stats import CompileStats

    def compiler(gm, example_inputs):
        stats = CompileStats.current()
        start = time.perf_counter()
        if settings:
            compiled = danlu_inductor.compile_fx(gm, example_inputs, options=settings)
        else:
            compiled = danlu_inductor.compile_fx(gm, example_inputs)
        stats.add_phase("inductor", time.perf_counter() - start)
        stats.record_kernels(compiled)
        return compiled

    return aot_backend(
        compiler,
        compiler,
        inference_compiler=compiler,
        decompositions=decomposition_table("canonical"),
    )
