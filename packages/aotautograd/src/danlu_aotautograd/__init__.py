"""Ahead-of-time autograd: joint forward/backward tracing at ATen level, functionalization and partitioning."""

__version__ = "0.2.0.dev0"

from danlu_aotautograd.api import (  # noqa: E402
    AotFunction,
    AotModule,
    aot_backend,
    aot_eager,
    aot_function,
    aot_graph,
    aot_module,
    run_graph,
)
from danlu_aotautograd.errors import AotNotSupported  # noqa: E402
from danlu_aotautograd.partition import (  # noqa: E402
    Partition,
    default_partition,
    min_cut_partition,
)
from danlu_aotautograd.printing import (  # noqa: E402
    format_aot,
    format_compiled,
    format_graph,
    print_graphs,
    saved_bytes_report,
)
from danlu_aotautograd.tracing.shadow_tensor import ShadowTensor  # noqa: E402

__all__ = [
    "AotFunction",
    "AotModule",
    "AotNotSupported",
    "Partition",
    "ShadowTensor",
    "aot_backend",
    "aot_eager",
    "aot_function",
    "aot_graph",
    "aot_module",
    "default_partition",
    "format_aot",
    "format_compiled",
    "format_graph",
    "print_graphs",
    "saved_bytes_report",
    "min_cut_partition",
    "run_graph",
]
