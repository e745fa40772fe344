"""danlu_dynamo's top-level modules and subpackages (``optimizer``, ``bytecode_path``,
``segments``, ``capture``, ...) import each other without a circle.

Imports are read from the source (``ast``), not run, and imports inside functions count: a
circle that only closes at call time ties the modules together as much as one at import time.
Each subpackage is one node (``danlu_dynamo.capture.variables.base`` is ``capture``); imports
within a subpackage are its own business. Each top-level module is also imported first, alone,
in a fresh interpreter.

Run as a script to print the import graph and any cycle: ``python tests/test_import_cycles.py``.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = "danlu_dynamo"
SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / PACKAGE


def module_files() -> dict[str, pathlib.Path]:
    """``{dotted module name: file}`` for every Python module of the package."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def extension_modules() -> set[str]:
    """C extensions (``danlu_dynamo._eval_frame``): imported, never parsed."""
    names = set()
    for path in SRC.rglob("*.so"):
        parts = list(path.relative_to(SRC.parent).parts)
        names.add(".".join([*parts[:-1], parts[-1].partition(".")[0]]))
    return names


def top_level_units() -> list[str]:
    """The top-level modules and subpackages, as ``danlu_dynamo`` names them."""
    return sorted({_unit(m) for m in module_files()} - {PACKAGE})


def _unit(module: str) -> str:
    """``danlu_dynamo.capture.variables.base`` -> ``capture``; the root stays the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def imported_modules(tree: ast.AST, module: str, is_package: bool, modules) -> list[str]:
    """The dotted names a module imports, anywhere in it (functions included).
    ``from pkg import sub`` is an import of ``pkg.sub`` when ``sub`` is a module, else of
    ``pkg``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            if len(subs) < len(node.names):  # names defined in ``base`` itself
                found.append(base)
            found += subs
    return found


def import_graph() -> dict[str, dict[str, list[str]]]:
    """``{unit: {imported unit: ["module -> module", ...]}}`` between top-level units."""
    files = module_files()
    modules = set(files) | extension_modules()
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        src = _unit(name)
        graph.setdefault(src, {})
        for target in imported_modules(tree, name, path.name == "__init__.py", modules):
            if target not in modules:
                continue  # another package, or a name imported from one
            dst = _unit(target)
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
    return [
        f"  {e}"
        for a in component
        for b, edges in sorted(graph[a].items())
        if b in component
        for e in edges
    ]


def test_no_import_cycle_between_top_level_modules():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "\n".join(line for c in found for line in [str(c), *describe(graph, c)])


def test_the_checker_sees_a_cycle():
    assert cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": []}, "b": {}}) == []


def test_the_checker_sees_function_level_imports():
    tree = ast.parse("def f():\n    from .b import g\n    from . import c\n")
    modules = {"p", "p.a", "p.b", "p.c"}
    assert imported_modules(tree, "p.a", False, modules) == ["p.b", "p.c"]


# Imports torch once, then forks a child per module: each child imports that module first,
# as a fresh interpreter would, without paying for torch again.
_IMPORT_EACH = """
import importlib, os, sys, traceback
import torch  # noqa: F401
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status:
        failed.append(name)
print("failed:", *failed)
sys.exit(bool(failed))
"""


def test_each_top_level_module_imports_first_in_a_fresh_interpreter(tmp_path):
    names = [f"{PACKAGE}.{u}" for u in top_level_units()]
    assert f"{PACKAGE}.optimizer" in names and f"{PACKAGE}.segments" in names
    run = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, *names],
        capture_output=True,
        text=True,
        timeout=300,
        # not the source directory: the package as installed (a CI install builds the C
        # extension into site-packages, not next to the sources)
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr


if __name__ == "__main__":
    graph = import_graph()
    for unit, targets in sorted(graph.items()):
        print(f"{unit} -> {', '.join(sorted(targets)) or '-'}")
    found = cycles(graph)
    print(f"{len(found)} cycle(s)")
    for component in found:
        print(" ", " <-> ".join(component))
        print("\n".join(describe(graph, component)))
    sys.exit(bool(found))
