"""``compile_fx`` and ``compile_fx_batch``: an ATen graph to a callable, on the target its
devices pick (``steps.choose_backend``): C++/OpenMP (cpp.py) for CPU graphs, Triton
(triton.py) for CUDA graphs, else the graph runs eagerly."""

from __future__ import annotations

import torch

from danlu_inductor.cudagraphs import wrap_cudagraphs
from danlu_inductor.options import validate_options, verify_ir_scope
from danlu_inductor.passes.constant_folding import fold_constants
from danlu_inductor.passes.cpu_scalars import move_cpu_scalars
from danlu_inductor.passes.one_hot_sums import fold_one_hot_sums
from danlu_inductor.pipeline import cpp
from danlu_inductor.pipeline import triton as triton_path
from danlu_inductor.pipeline.compiled import EagerGraph
from danlu_inductor.pipeline.steps import choose_backend, maybe_dump, run_eagerly


def compile_fx(gm: torch.fx.GraphModule, example_inputs, options=None):
    """Compile an ATen-level FX graph (flat tensor inputs) into a Python callable.

    CPU graphs get C++/OpenMP kernels, CUDA graphs Triton kernels (see ``options.OPTIONS``
    for ``options``; ``validate_options`` checks them). A graph that mixes devices, or that
    neither backend can take, runs eagerly and says why in ``report["fallback_reason"]``.
    """
    opts = validate_options(options)
    with verify_ir_scope(opts.verify_ir):  # ir/verify.py, run by the scheduler
        return _compile_fx(gm, example_inputs, opts)


def _compile_fx(gm, example_inputs, opts):
    move_cpu_scalars(gm, example_inputs)  # 0-dim CPU values of a CUDA graph, on its device
    fold_one_hot_sums(gm)  # before folding: it reads the iota's arange
    fold_constants(gm)  # values that depend on no input: computed once, here
    backend, where = choose_backend(gm, example_inputs)
    if backend == "eager":
        compiled = run_eagerly(gm, where)
    elif backend == "triton":
        # through the module, so that tests can replace the Triton path
        compiled = triton_path.compile_triton(gm, example_inputs, where, opts)
        if not isinstance(compiled, EagerGraph):
            maybe_dump(compiled, gm)
    else:
        compiled = compile_fx_batch([(gm, example_inputs)])[0]
    if opts.cudagraphs:
        compiled = wrap_cudagraphs(compiled, gm, example_inputs)
    return compiled


def compile_fx_batch(items):
    """Compile several graphs with one C++ compiler run (the compiler's start-up dominates
    small graphs). Returns one callable per ``(gm, example_inputs)``."""
    for gm, _ in items:
        fold_one_hot_sums(gm)
        fold_constants(gm)
    generated = []
    for i, (gm, example_inputs) in enumerate(items):
        backend, where = choose_backend(gm, example_inputs)
        if backend == "triton":
            generated.append(compile_fx(gm, example_inputs))
        elif backend == "eager":
            generated.append(run_eagerly(gm, where))
        else:
            prefix = f"g{i}_" if len(items) > 1 else ""
            generated.append(cpp.generate(gm, example_inputs, kernel_prefix=prefix))
    built = iter(cpp.build_and_load([g for g in generated if isinstance(g, cpp.GeneratedGraph)]))
    return [next(built) if isinstance(g, cpp.GeneratedGraph) else g for g in generated]
