"""A package's import graph, read from its source with ``ast`` (nothing is imported), and its
cycles. Used by the packages' import-layer tests (danlu_inductor's layers, danlu_dynamo's
top-level modules); run as a script to print a package's cycles:
``python tools/import_graph.py packages/dynamo/src/danlu_dynamo``.

A module's imports at module level (class bodies included, ``if TYPE_CHECKING:`` blocks left
out) are always counted; with ``lazy`` the imports inside functions too, since a circle that
only closes at call time still ties two parts together. ``from pkg import sub`` counts as
importing ``pkg.sub`` alone when ``sub`` is a module (``pkg`` has been imported already, as the
parent of the importing module or of ``sub``), else as importing ``pkg``.
"""

from __future__ import annotations

import ast
import pathlib
import sys


def module_files(src: pathlib.Path) -> dict[str, pathlib.Path]:
    """``{dotted module name: file}`` for every Python module of the package at ``src``."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def extension_modules(src: pathlib.Path) -> set[str]:
    """C extensions built next to the sources (``danlu_dynamo._eval_frame``): imported, never
    parsed."""
    names = set()
    for path in src.rglob("*.so"):
        parts = list(path.relative_to(src.parent).parts)
        names.add(".".join([*parts[:-1], parts[-1].partition(".")[0]]))
    return names


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def imports(tree: ast.AST, module: str, is_package: bool, modules, lazy: bool = True):
    """Yield the dotted names of the modules ``module`` imports (see the module docstring)."""
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


def top_level(module: str) -> str:
    """``pkg.codegen.triton.backend`` -> ``codegen``; the root stays the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def import_graph(src: pathlib.Path, unit=top_level, lazy: bool = True):
    """``{unit: {imported unit: ["module -> module", ...]}}`` for the package at ``src``; a
    unit is what ``unit(module name)`` says (a top-level part, or each module itself)."""
    files = module_files(src)
    modules = set(files) | extension_modules(src)
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        here = unit(name)
        graph.setdefault(here, {})
        for target in imports(tree, name, path.name == "__init__.py", modules, lazy):
            if target not in modules:
                continue  # another package, or a name (not a module) imported from one
            there = unit(target)
            if there != here:
                graph[here].setdefault(there, []).append(f"{name} -> {target}")
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


def report(graph) -> str:
    """Each cycle and the imports that make it; empty when there is none."""
    return "\n".join(line for c in cycles(graph) for line in [str(c), *describe(graph, c)])


if __name__ == "__main__":
    graph = import_graph(pathlib.Path(sys.argv[1]).resolve())
    for unit, targets in sorted(graph.items()):
        print(f"{unit} -> {', '.join(sorted(targets)) or '-'}")
    print(report(graph) or "no cycle")
    sys.exit(bool(cycles(graph)))
