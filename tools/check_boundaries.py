"""Finds package code that reaches into torch's own compiler stack.

torch is our tensor runtime; its compiler (the list below, from DESIGN.md) is the anchor we
measure against and may appear in tests and benchmarks, never in a package's `src/`.
Run as a script to scan the repo: `python tools/check_boundaries.py`.
"""

from __future__ import annotations

import ast
import pathlib
import sys

FORBIDDEN_MODULES = (
    "torch._dynamo",
    "torch._inductor",
    "torch._functorch",
    "torch._decomp",
    "torch._refs",
    "torch._prims",
    "torch._prims_common",
    "torch._subclasses",
    "torch.export",
    "torch.fx.experimental.proxy_tensor",
    "torch.fx.experimental.symbolic_shapes",
    "torch._C._dynamo",
)
FORBIDDEN_CALLS = ("torch.compile",)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _forbidden(name: str) -> str | None:
    for mod in FORBIDDEN_MODULES:
        if name == mod or name.startswith(mod + "."):
            return mod
    return None


def scan_file(path: pathlib.Path) -> list[str]:
    """Every forbidden import, attribute reference or call in one file, as 'file:line: what'."""
    tree = ast.parse(path.read_text(), filename=str(path))
    hits: dict[int, str] = {}  # one report per line: the outermost expression found first
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            names = [dotted] if dotted else []
        elif isinstance(node, ast.Call) and _dotted(node.func) in FORBIDDEN_CALLS:
            hits.setdefault(node.lineno, f"{path}:{node.lineno}: calls {_dotted(node.func)}")
            continue
        for name in names:
            mod = _forbidden(name)
            if mod:
                hits.setdefault(node.lineno, f"{path}:{node.lineno}: uses {mod} ({name})")
                break
    return [hits[line] for line in sorted(hits)]


def scan(roots: list[pathlib.Path]) -> list[str]:
    hits = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            hits.extend(scan_file(path))
    return hits


def package_sources(repo: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in (repo / "packages").glob("*/src") if p.is_dir())


if __name__ == "__main__":
    repo = pathlib.Path(__file__).resolve().parent.parent
    found = scan(package_sources(repo))
    print("\n".join(found) or "no package reaches into torch's compiler stack")
    sys.exit(1 if found else 0)
