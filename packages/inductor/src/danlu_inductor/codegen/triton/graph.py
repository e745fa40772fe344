"""Old import path of ``compile_fx_triton``, now ``danlu_inductor.pipeline.triton``.

Resolved on first use: the pipeline imports codegen, so codegen does not import the pipeline
when it loads.
"""


def __getattr__(name):
    if name == "compile_fx_triton":
        from danlu_inductor.pipeline.triton import compile_fx_triton

        return compile_fx_triton
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
