"""`danlu.compile`: the one line users type."""

from __future__ import annotations

import builtins
import functools
import os
import types

import torch

from danlu_dynamo import OptimizedModule

from .backends import lookup_backend, start_build_workers_for
from .stats import CompileStats


def compile(
    model=None,
    *,
    backend="inductor",
    mode=None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    options: dict | None = None,
):
    """Compile a function or `nn.Module`; usable as `danlu.compile(fn)` or `@danlu.compile(...)`.

    backend: "inductor" (default), "aot_eager", "eager", another registered name, or a callable
    `backend(gm, example_inputs) -> callable`. mode: None, "reduce-overhead", "max-autotune".
    fullgraph: raise at the first graph break instead of splitting the graph.
    dynamic: None (automatic), True (symbolic sizes from the start), False (always specialise).
    options: inductor options (see `danlu_inductor` README).
    """
    if model is None:
        return functools.partial(
            compile,
            backend=backend,
            mode=mode,
            fullgraph=fullgraph,
            dynamic=dynamic,
            options=options,
        )
    if not (callable(model) or isinstance(model, torch.nn.Module)):
        raise TypeError(
            f"danlu.compile expects a function or nn.Module, got {type(model).__name__}"
        )
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", "")
    compiler = CompileStats.current().wrap_backend(
        lookup_backend(backend, mode=mode, options=options), name
    )

    import danlu_dynamo

    from .config import _applied_limit, apply_recompile_limit, config

    if _applied_limit[0] != config.recompile_limit:
        apply_recompile_limit(config.recompile_limit)
    if backend == "inductor" and isinstance(model, torch.nn.Module):
        start_build_workers_for(model)
    optimize = danlu_dynamo.optimize(compiler, fullgraph=fullgraph, dynamic=dynamic)
    capture = getattr(optimize, "ctx", None)
    if capture is not None:
        CompileStats.current().captures.append(capture)
    if isinstance(model, torch.nn.Module):
        if _forward_is_library_code(model) and not _runs_user_module(model):
            return OptimizedModule(model, capture, call=optimize(_calling(model)))
        return optimize(model)  # capture's OptimizedModule: the one module wrapper
    return optimize(model)


def _forward_is_library_code(mod: torch.nn.Module) -> bool:
    """True for torch's own modules (`nn.Sequential`, `nn.Linear`, ...): capture treats their
    forward as library code and would run it eagerly when it is the compiled entry point."""
    code = getattr(getattr(type(mod), "forward", None), "__code__", None)
    # torch's own directory, not "/torch/" anywhere in the path: an environment installed
    # under such a path (/opt/torch/.venv) would make every model library code
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


def _runs_user_module(mod: torch.nn.Module) -> bool:
    """DistributedDataParallel (and its kind): its forward runs eagerly, as under
    torch.compile, and capture starts in the module it wraps, where DDP marks itself active
    (so the graph can be split at its gradient buckets)."""
    parallel = getattr(torch.nn, "parallel", None)
    ddp = getattr(parallel, "DistributedDataParallel", None)
    return ddp is not None and isinstance(mod, ddp)


_TORCH_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "")


def _calling(mod: torch.nn.Module):
    """A plain function that calls `mod`: capture starts here and inlines the module.

    Capture never starts in frames of danlu's own modules (it treats them as library code),
    so the function gets globals of its own, named as the user's entry point."""

    def call_module(*args, **kwargs):
        return mod(*args, **kwargs)

    entry_globals = {"__name__": "danlu_entry", "__builtins__": builtins}
    fn = types.FunctionType(
        call_module.__code__, entry_globals, "call_module", None, call_module.__closure__
    )
    fn.__qualname__ = f"compiled {type(mod).__name__}"
    return fn
