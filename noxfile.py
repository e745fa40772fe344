"""Sessions for the danlu monorepo.

Each package is tested alone in a fresh virtualenv that holds only that package, the danlu
packages its pyproject declares (installed from this tree, never from an index) and its test
dependencies; `integration` installs everything together. `tests` runs all of them.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil

import nox

ROOT = pathlib.Path(__file__).parent
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))

nox.options.default_venv_backend = "venv"
# Byte-compiling torch's thousands of files at install costs more than compiling the few that
# the tests import, lazily.
os.environ.setdefault("PIP_NO_COMPILE", "1")
nox.options.reuse_venv = "yes"
# Each torch venv takes 1-2 GB; on a machine with little disk (CI), DANLU_NOX_DISCARD_VENVS=1
# deletes a session's venv once its tests have run, so the peak is one venv, not seven.
DISCARD_VENVS = os.environ.get("DANLU_NOX_DISCARD_VENVS") == "1"
nox.options.sessions = ["lint", "tests"]

# package folder -> (distribution, import name, danlu packages it declares)
PACKAGES = {
    "primtorch": ("danlu-primtorch", "danlu_primtorch", []),
    "dynamo": ("danlu-dynamo", "danlu_dynamo", ["primtorch"]),
    "aotautograd": ("danlu-aotautograd", "danlu_aotautograd", ["primtorch"]),
    "inductor": ("danlu-inductor", "danlu_inductor", ["primtorch"]),
    "compile": ("danlu", "danlu", ["primtorch", "dynamo", "aotautograd", "inductor"]),
}
EXTRAS = {"inductor": "[test,triton]"}
TEST_SESSIONS = [*PACKAGES, "dynamo-hook-py312", "dynamo-hook-py313", "integration"]

# pyenv keeps interpreters outside PATH; let nox find python3.12 / python3.13 there.
_pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
for _bin in sorted(glob.glob(os.path.join(_pyenv_root, "versions", "3.1[23].*", "bin"))):
    os.environ["PATH"] = _bin + os.pathsep + os.environ["PATH"]


def _pkg(name: str, extras: str = "") -> str:
    return f"{ROOT / 'packages' / name}{extras}"


def _reinstall_own(session: nox.Session, names: list[str]) -> None:
    """Our packages again, without their dependencies (so reused venvs pick up source changes)
    and without build isolation: the optional C++ extensions (dynamo's ``_tensor_checks``,
    inductor's ``_replay_checks``) build only where torch imports during the build, against
    the torch of this venv."""
    session.install("setuptools>=68")
    session.install(
        *CONSTRAINTS,
        "--no-deps",
        "--force-reinstall",
        "--no-build-isolation",
        *[_pkg(n) for n in names],
    )


def _install_packages(session: nox.Session, names: list[str], with_tests: bool) -> None:
    if not names:
        return
    args = []
    for name in names:
        extras = EXTRAS.get(name, "[test]") if with_tests else ""
        args.append(_pkg(name, extras))
    session.install(*CONSTRAINTS, *args)
    dists = [PACKAGES[n][0] for n in names]
    _reinstall_own(session, names)
    session.log("installed: " + ", ".join(dists))


def _pytest(session: nox.Session, *paths: str) -> None:
    try:
        session.run(
            "python",
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            *paths,
            *session.posargs,
            # DANLU_EXPECT_TENSOR_CHECKS: the C++ extensions must be built here (their tests
            # fail rather than skip)
            env={"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "2", "DANLU_EXPECT_TENSOR_CHECKS": "1"},
        )
    finally:
        if DISCARD_VENVS:
            session.log(f"discarding {session.virtualenv.location}")
            shutil.rmtree(session.virtualenv.location, ignore_errors=True)


def _package_session(folder: str):
    def run(session: nox.Session) -> None:
        deps = PACKAGES[folder][2]
        # Declared danlu dependencies without their test extras, then the package with its own.
        _install_packages(session, deps, with_tests=False)
        session.install(*CONSTRAINTS, _pkg(folder, EXTRAS.get(folder, "[test]")))
        _reinstall_own(session, [folder])
        _pytest(session, str(ROOT / "packages" / folder / "tests"))

    run.__doc__ = f"{PACKAGES[folder][0]} alone: its tests in a venv holding only what it declares."
    return run


for _folder in PACKAGES:
    nox.session(name=_folder, python="3.11")(_package_session(_folder))


def _hook_session(session: nox.Session) -> None:
    """The frame hook and bytecode layer on another CPython (these parts need no torch)."""
    session.install("pytest")
    session.install("--no-deps", "--force-reinstall", _pkg("dynamo"))
    _pytest(session, str(ROOT / "packages" / "dynamo" / "tests" / "no_torch"))


nox.session(name="dynamo-hook-py312", python="3.12")(_hook_session)
nox.session(name="dynamo-hook-py313", python="3.13")(_hook_session)


@nox.session(python="3.11")
def integration(session: nox.Session) -> None:
    """Every package installed together; runs integration_tests/."""
    _install_packages(session, list(PACKAGES), with_tests=True)
    session.install(*CONSTRAINTS, "transformers")
    _pytest(session, str(ROOT / "integration_tests"))


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Every package alone, then all together."""
    for name in TEST_SESSIONS:
        session.notify(name)


@nox.session(python="3.11")
def demo(session: nox.Session) -> None:
    """The main job: install everything and run the demo, torch.compile beside danlu."""
    _install_packages(session, list(PACKAGES), with_tests=False)
    session.run(
        "python", str(ROOT / "benchmarks" / "demo_beside_torch_compile.py"), *session.posargs
    )


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", str(ROOT))
    session.run("ruff", "format", "--check", str(ROOT))


@nox.session(python="3.11")
def build(session: nox.Session) -> None:
    """sdist and wheel for every package; checks names, versions and declared dependencies."""
    session.install("build", "packaging")
    out = ROOT / "dist"
    shutil.rmtree(out, ignore_errors=True)
    for folder in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(out), _pkg(folder))
    session.run("python", str(ROOT / "tools" / "check_dists.py"), str(out))
