"""danlu_dynamo's top-level modules and subpackages (``optimizer``, ``bytecode_path``,
``segments``, ``capture``, ...) import each other without a circle.

Imports are read from the source by ``tools/import_graph.py`` (``ast``, nothing is run), and
imports inside functions count: a circle that only closes at call time ties the modules
together as much as one at import time.
Each subpackage is one node (``danlu_dynamo.capture.variables.base`` is ``capture``); imports
within a subpackage are its own business. Each top-level module is also imported first, alone,
in a fresh interpreter.

Run as a script to print the import graph and any cycle: ``python tests/test_import_cycles.py``.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import subprocess
import sys

PACKAGE = "danlu_dynamo"
SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / PACKAGE
# the checker shared with danlu_inductor's import test (tools/ is not an installed package)
_spec = importlib.util.spec_from_file_location(
    "import_graph", pathlib.Path(__file__).resolve().parents[3] / "tools" / "import_graph.py"
)
ig = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ig)


def top_level_units() -> list[str]:
    """The top-level modules and subpackages, as ``danlu_dynamo`` names them."""
    return sorted({ig.top_level(m) for m in ig.module_files(SRC)} - {PACKAGE})


def test_no_import_cycle_between_top_level_modules():
    graph = ig.import_graph(SRC)
    assert not ig.cycles(graph), ig.report(graph)


def test_the_checker_sees_a_cycle():
    assert ig.cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == [["a", "b", "c"]]
    assert ig.cycles({"a": {"b": []}, "b": {}}) == []


def test_the_checker_sees_function_level_imports():
    tree = ast.parse("def f():\n    from .b import g\n    from . import c\n")
    modules = {"p", "p.a", "p.b", "p.c"}
    assert list(ig.imports(tree, "p.a", False, modules)) == ["p.b", "p.c"]


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
    graph = ig.import_graph(SRC)
    for unit, targets in sorted(graph.items()):
        print(f"{unit} -> {', '.join(sorted(targets)) or '-'}")
    print(ig.report(graph) or "no cycle")
    sys.exit(bool(ig.cycles(graph)))
