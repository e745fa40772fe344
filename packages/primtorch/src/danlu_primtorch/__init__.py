"""Operator sets for PyTorch programs: prims, a canonical ATen set, decompositions, fake tensors, symbolic shapes and an ATen-level tracer."""

__version__ = "0.2.0.dev0"

from danlu_primtorch import prims  # noqa: E402, F401  (the danlu_prims op set)
from danlu_primtorch.canonical import CANONICAL_OPS, is_canonical  # noqa: E402, F401
from danlu_primtorch.decompositions import decomposition_table  # noqa: E402, F401
from danlu_primtorch.fake import (  # noqa: E402, F401
    DataDependentOutputError,
    FakeTensor,
    FakeTensorMode,
    UnsupportedFakeOp,
)
from danlu_primtorch.symbolic import ShapeEnv, sym_expr  # noqa: E402, F401
from danlu_primtorch.tracing import AtenTracer, format_graph, trace  # noqa: E402, F401
