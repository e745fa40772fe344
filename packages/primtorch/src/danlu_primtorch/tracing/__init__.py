"""The ATen-level tracer: Python function -> fx.GraphModule of ATen/prim OpOverloads."""

from .cleanup import eliminate_dead_nodes
from .printing import brief_value, describe_value, format_graph, short_dtype, target_name
from .trace import trace
from .tracer import AtenTracer, TracingError, flat_inputs

__all__ = [
    "AtenTracer",
    "TracingError",
    "brief_value",
    "describe_value",
    "eliminate_dead_nodes",
    "flat_inputs",
    "format_graph",
    "short_dtype",
    "target_name",
    "trace",
]
