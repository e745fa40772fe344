"""The compiler's driver: ATen graph -> lower -> schedule -> generate -> build -> callable,
for both targets. ``codegen/`` writes the kernels and the wrapper and builds them; this
package decides what runs when, what happens on failure, and what the report says.

driver.py: the entry points, which pick the target; steps.py: the steps both targets
share; cpp.py and triton.py: the two targets' paths; report.py: the report, built once;
compiled.py: what the entry points return.
"""

from danlu_inductor.pipeline.compiled import CompiledGraph, EagerGraph
from danlu_inductor.pipeline.driver import compile_fx, compile_fx_batch
from danlu_inductor.pipeline.triton import compile_fx_triton

__all__ = ["CompiledGraph", "EagerGraph", "compile_fx", "compile_fx_batch", "compile_fx_triton"]
