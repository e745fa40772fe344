"""Checks the wheels and sdists that `nox -s build` made.

For every package: one wheel and one sdist, named after its distribution, whose metadata carries
the version in its source and exactly the dependencies its pyproject declares.
"""

from __future__ import annotations

import ast
import pathlib
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parent.parent


def source_version(pkg: pathlib.Path, import_name: str) -> str:
    init = pkg / "src" / import_name / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{init}: no __version__")


def wheel_metadata(path: pathlib.Path):
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(zf.read(name).decode())


def sdist_metadata(path: pathlib.Path):
    with tarfile.open(path) as tf:
        member = next(
            m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        )
        return Parser().parsestr(tf.extractfile(member).read().decode())


def main(out: pathlib.Path) -> int:
    errors, seen = [], {}
    for pkg in sorted((ROOT / "packages").iterdir()):
        pyproject = tomllib.loads((pkg / "pyproject.toml").read_text())
        project = pyproject["project"]
        dist = project["name"]
        version_attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
        import_name = version_attr.rsplit(".", 1)[0]
        version = source_version(pkg, import_name)
        declared = {str(Requirement(r)) for r in project.get("dependencies", [])}
        stem = canonicalize_name(dist).replace("-", "_")
        wheels = list(out.glob(f"{stem}-{version}-*.whl"))
        sdists = list(out.glob(f"{stem}-{version}.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            errors.append(
                f"{dist}: expected one wheel and one sdist for {version}, got {wheels} {sdists}"
            )
            continue
        for meta in (wheel_metadata(wheels[0]), sdist_metadata(sdists[0])):
            if meta["Name"] != dist or meta["Version"] != version:
                errors.append(f"{dist}: metadata says {meta['Name']} {meta['Version']}")
            required = {
                str(Requirement(r))
                for r in meta.get_all("Requires-Dist") or []
                if "extra ==" not in r
            }
            if required != declared:
                errors.append(
                    f"{dist}: Requires-Dist {sorted(required)} != pyproject {sorted(declared)}"
                )
        seen[dist] = version
        print(f"ok  {dist:20} {version:12} {wheels[0].name}")
    if len(seen) != len(set(seen)):
        errors.append("distribution names are not distinct")
    for e in errors:
        print("FAIL", e)
    return 1 if errors or not seen else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
