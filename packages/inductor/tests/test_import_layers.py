"""danlu_inductor's top-level parts (``ir``, ``lowering``, ``codegen``, ``pipeline``, ...), and
its modules one by one, import each other without a circle.

Imports are read from the source (``ast``), not run. A module's imports at module level
(class bodies included, ``if TYPE_CHECKING:`` blocks left out) are the ones that must not form
a cycle; imports inside functions are reported too, since a circle that only closes at call
time still ties two layers together. Importing ``danlu_inductor.x.y`` is an edge to ``x`` only:
the root ``__init__`` that Python runs first counts only where a module names it
(``from danlu_inductor import ...``).

Run as a script to print the cycles found: ``python tests/test_import_layers.py``.
"""

from __future__ import annotations

import ast
import pathlib
import sys

PACKAGE = "danlu_inductor"
SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / PACKAGE

# Function-level imports that close a circle on purpose: old import paths kept working.
ALLOWED_LAZY = {
    # the Triton path's old public name, codegen.triton.graph.compile_fx_triton
    "danlu_inductor.codegen.triton.graph -> danlu_inductor.pipeline.triton",
}


def module_names() -> dict[str, pathlib.Path]:
    """``{dotted module name: file}`` for every module of the package."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def _imports(tree: ast.AST, module: str, is_package: bool, lazy: bool, modules):
    """Yield the dotted names of the modules one module imports; ``lazy``: those inside
    functions too. ``from pkg import sub`` counts as importing ``pkg.sub`` alone (``pkg`` has
    been imported already, as the parent of the importing module or of ``sub``)."""
    package = module if is_package else module.rpartition(".")[0]

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if lazy:
                    yield from visit(child)
                continue
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                submodules = [f"{base}.{a.name}" for a in child.names]
                submodules = [m for m in submodules if m in modules]
                if len(submodules) < len(child.names):  # names defined in ``base`` itself
                    yield base
                yield from submodules
            else:
                yield from visit(child)

    yield from visit(tree)


def _layer(module: str) -> str:
    """``danlu_inductor.codegen.triton.backend`` -> ``codegen``; the root stays the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _module(module: str) -> str:
    return module


def import_graph(lazy: bool, unit=_layer) -> dict[str, dict[str, list[str]]]:
    """``{unit: {imported unit: ["module -> module", ...]}}``; a unit is a layer
    (``_layer``) or each module itself (``_module``)."""
    modules = module_names()
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        src = unit(name)
        graph.setdefault(src, {})
        for target in _imports(tree, name, path.name == "__init__.py", lazy, modules):
            if target not in modules:
                continue  # another package, or a name (not a module) imported from one
            dst = unit(target)
            if dst != src:
                graph[src].setdefault(dst, []).append(f"{name} -> {target}")
    return graph


def cycles(graph: dict[str, dict]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def describe(graph, component) -> list[str]:
    """The imports that tie a cycle's units together."""
    lines = []
    for a in component:
        for b, edges in sorted(graph[a].items()):
            if b in component:
                lines += [f"  {e}" for e in edges]
    return lines


def _without(graph, allowed):
    out = {}
    for a, dst in graph.items():
        kept = {b: [e for e in edges if e not in allowed] for b, edges in dst.items()}
        out[a] = {b: edges for b, edges in kept.items() if edges}
    return out


def _assert_acyclic(graph):
    found = cycles(graph)
    assert not found, "\n".join(line for c in found for line in [str(c), *describe(graph, c)])


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
    assert cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": []}, "b": {}}) == []


if __name__ == "__main__":
    status = 0
    for lazy in (False, True):
        for unit in (_layer, _module):
            graph = import_graph(lazy, unit)
            if lazy:
                graph = _without(graph, ALLOWED_LAZY)
            found = cycles(graph)
            imports = "with function-level imports" if lazy else "module level"
            units = "layers" if unit is _layer else "modules"
            print(f"{units}, {imports}: {len(found)} cycle(s)")
            for component in found:
                print(" ", " <-> ".join(component))
                print("\n".join(describe(graph, component)))
            status |= bool(found)
    print("left out on purpose (function level):", *sorted(ALLOWED_LAZY), sep="\n  ")
    sys.exit(status)
