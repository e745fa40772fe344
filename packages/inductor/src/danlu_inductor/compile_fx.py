"""Old import path of the entry points, kept for callers: the driver lives in ``pipeline/``.

``danlu_inductor/__init__.py`` imports through this module on purpose: importing a submodule
sets the package attribute of its name, so this module must be loaded before
``danlu_inductor.compile_fx`` is bound to the function.
"""

from danlu_inductor.pipeline.compiled import CompiledGraph, EagerGraph
from danlu_inductor.pipeline.driver import compile_fx, compile_fx_batch
from danlu_inductor.pipeline.steps import choose_backend, triton_on_cpu

__all__ = [
    "CompiledGraph",
    "EagerGraph",
    "choose_backend",
    "compile_fx",
    "compile_fx_batch",
    "triton_on_cpu",
]
