"""A loop-level compiler for ATen graphs: fusion, and C++/OpenMP and Triton code generation."""

__version__ = "0.2.0.dev0"

# through the old module path on purpose: see compile_fx.py
from danlu_inductor.compile_fx import CompiledGraph, compile_fx, compile_fx_batch  # noqa: E402
from danlu_inductor.decompositions import decomposition_table  # noqa: E402
from danlu_inductor.inference import inference_backend  # noqa: E402
from danlu_inductor.ir.symbols import DynamicShapeUnsupported, NotLowered  # noqa: E402
from danlu_inductor.options import MODES, OPTIONS, check_mode, validate_options  # noqa: E402
from danlu_inductor.pipeline.triton import start_build_workers  # noqa: E402

__all__ = [
    "MODES",
    "OPTIONS",
    "CompiledGraph",
    "DynamicShapeUnsupported",
    "NotLowered",
    "compile_fx",
    "compile_fx_batch",
    "decomposition_table",
    "inference_backend",
    "check_mode",
    "start_build_workers",
    "validate_options",
]
