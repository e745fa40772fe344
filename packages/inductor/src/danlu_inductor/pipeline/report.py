"""``report``: what a compiled graph says about itself, built here for both targets."""

from __future__ import annotations

# Every key a generated graph's report may have, in the order it lists them; the Triton
# path's own entries (device, kernel_kinds, triton_fallbacks, padded_matmuls,
# precompiled) are absent from C++ reports.
REPORT_KEYS = (
    "backend",
    "device",
    "kernels",
    "kernel_kinds",
    "extern_calls",
    "fallback_calls",
    "fallback_ops",
    "fallback_reasons",
    "triton_fallbacks",
    "padded_matmuls",
    "lowering_s",
    "codegen_s",
    "compile_s",
    "library",
    "memory",
    "dynamic",
    "precompiled",
)


def graph_report(backend: str, graph, wrapper, timings, library, **target_entries) -> dict:
    """The report of a generated graph. ``timings``: seconds spent lowering, generating code
    (scheduling included) and compiling the kernels; ``library``: the built file, if any."""
    lowering_s, codegen_s, compile_s = timings
    entries = {
        "backend": backend,
        "kernels": len(wrapper.kernel_names),
        "extern_calls": sum(graph.externs.values()),
        "fallback_calls": sum(graph.fallbacks.values()),
        "fallback_ops": dict(graph.fallbacks),
        "fallback_reasons": dict(graph.fallback_reasons),
        "lowering_s": lowering_s,
        "codegen_s": codegen_s,
        "compile_s": compile_s,
        "library": str(library) if library else None,
        "memory": list(wrapper.memory_log),
        "dynamic": graph.is_dynamic,
        **target_entries,
    }
    unknown = set(entries) - set(REPORT_KEYS)
    if unknown:
        raise ValueError(f"report keys not in REPORT_KEYS: {sorted(unknown)}")
    return {key: entries[key] for key in REPORT_KEYS if key in entries}


def eager_report(reason: str, **entries) -> dict:
    """The report of a graph that runs as it is (``reason``: why it was not compiled)."""
    return {"kernels": 0, "fallback_reason": reason, "backend": "eager", **entries}
