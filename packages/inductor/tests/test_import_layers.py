"""danlu_inductor's top-level parts (``ir``, ``lowering``, ``codegen``, ``pipeline``, ...), and
its modules one by one, import each other without a circle.

Imports are read from the source by ``tools/import_graph.py`` (``ast``, nothing is run). A
module's imports at module level (class bodies included, ``if TYPE_CHECKING:`` blocks left out)
are the ones that must not form a cycle; imports inside functions are reported too, since a
circle that only closes at call time still ties two layers together. Importing ``danlu_inductor.x.y`` is an edge to ``x`` only:
the root ``__init__`` that Python runs first counts only where a module names it
(``from danlu_inductor import ...``).

Run as a script to print the cycles found: ``python tests/test_import_layers.py``.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

PACKAGE = "danlu_inductor"
SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / PACKAGE
# the checker shared with danlu_dynamo's import test (tools/ is not an installed package)
_spec = importlib.util.spec_from_file_location(
    "import_graph", pathlib.Path(__file__).resolve().parents[3] / "tools" / "import_graph.py"
)
ig = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ig)

# Function-level imports that close a circle on purpose: old import paths kept working.
ALLOWED_LAZY = {
    # the Triton path's old public name, codegen.triton.graph.compile_fx_triton
    "danlu_inductor.codegen.triton.graph -> danlu_inductor.pipeline.triton",
}


def _module(module: str) -> str:
    return module


def import_graph(lazy: bool, unit=ig.top_level) -> dict[str, dict[str, list[str]]]:
    """``{unit: {imported unit: ["module -> module", ...]}}``; a unit is a layer
    (``ig.top_level``) or each module itself (``_module``)."""
    return ig.import_graph(SRC, unit, lazy)


def _without(graph, allowed):
    out = {}
    for a, dst in graph.items():
        kept = {b: [e for e in edges if e not in allowed] for b, edges in dst.items()}
        out[a] = {b: edges for b, edges in kept.items() if edges}
    return out


def _assert_acyclic(graph):
    found = ig.cycles(graph)
    assert not found, ig.report(graph)


def test_no_import_cycle_between_layers_at_module_level():
    _assert_acyclic(import_graph(lazy=False))


def test_no_import_cycle_between_modules_at_module_level():
    _assert_acyclic(import_graph(lazy=False, unit=_module))


def test_no_import_cycle_through_function_level_imports():
    _assert_acyclic(_without(import_graph(lazy=True), ALLOWED_LAZY))
    _assert_acyclic(import_graph(lazy=True, unit=_module))


def test_old_import_paths_still_work():
    import danlu_inductor
    from danlu_inductor import pipeline
    from danlu_inductor.codegen.triton.graph import compile_fx_triton
    from danlu_inductor.compile_fx import CompiledGraph, EagerGraph, compile_fx_batch

    # the old module is loaded, and the package attribute of its name is still the function
    assert "danlu_inductor.compile_fx" in sys.modules
    assert danlu_inductor.compile_fx is pipeline.compile_fx
    assert (CompiledGraph, EagerGraph) == (pipeline.CompiledGraph, pipeline.EagerGraph)
    assert compile_fx_batch is danlu_inductor.compile_fx_batch
    assert compile_fx_triton is pipeline.compile_fx_triton


def test_the_checker_sees_a_cycle():
    assert ig.cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == [["a", "b", "c"]]
    assert ig.cycles({"a": {"b": []}, "b": {}}) == []


if __name__ == "__main__":
    status = 0
    for lazy in (False, True):
        for unit in (ig.top_level, _module):
            graph = import_graph(lazy, unit)
            if lazy:
                graph = _without(graph, ALLOWED_LAZY)
            found = ig.cycles(graph)
            imports = "with function-level imports" if lazy else "module level"
            units = "layers" if unit is ig.top_level else "modules"
            print(f"{units}, {imports}: {len(found)} cycle(s)")
            print(ig.report(graph))
            status |= bool(found)
    print("left out on purpose (function level):", *sorted(ALLOWED_LAZY), sep="\n  ")
    sys.exit(status)
