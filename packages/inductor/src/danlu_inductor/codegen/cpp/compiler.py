"""gcc -> shared library -> ctypes, behind an on-disk cache.

Key: sha256 of (source, flags, compiler version). Entries are written to a temporary name and
renamed into place (atomic on POSIX), so concurrent writers never expose a half-written
library; an entry that fails to load or lacks its symbols is deleted and rebuilt.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import pathlib
import subprocess
import tempfile
import threading
import time

log = logging.getLogger("danlu_inductor")

CXX = os.environ.get("DANLU_CXX", "g++")
BASE_FLAGS = [
    "-shared",
    "-fPIC",
    "-std=c++17",
    "-fopenmp",
    "-fwrapv",  # integer overflow wraps, like eager
    "-ffp-contract=off",  # no fused multiply-add: same rounding as eager's separate ops
    "-fno-math-errno",  # errno is unobservable from Python; lets sqrt & co vectorize
    "-w",
]


def opt_flags() -> list[str]:
    level = os.environ.get("DANLU_CPP_OPT", "-O3")
    flags = [level, "-march=native"]
    if _has_avx512():
        flags.append("-mprefer-vector-width=512")  # gcc defaults to 256-bit vectors
    return flags


@functools.cache
def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " avx512f " in line + " "
    except OSError:
        pass
    return False


def cache_dir() -> pathlib.Path:
    root = os.environ.get("DANLU_CACHE_DIR")
    base = pathlib.Path(root) if root else pathlib.Path.home() / ".cache" / "danlu"
    path = base / "inductor"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def compiler_version() -> str:
    try:
        out = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"danlu_inductor needs a C++ compiler ({CXX}): {e}") from e


class CompileStats:
    hits = 0
    misses = 0
    seconds = 0.0


_lock = threading.Lock()


def cache_key(source: str, flags: list[str]) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_version()):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def compile_library(source: str, symbols: list[str]) -> tuple[ctypes.CDLL, pathlib.Path]:
    """The loaded library for ``source`` (compiled now or found in the cache)."""
    flags = BASE_FLAGS + opt_flags()
    key = cache_key(source, flags)
    folder = cache_dir() / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    so_path = folder / f"{key}.so"
    if so_path.exists():
        lib = _try_load(so_path, symbols)
        if lib is not None:
            CompileStats.hits += 1
            return lib, so_path
        log.warning("danlu_inductor: corrupt cache entry %s, rebuilding", so_path)
        try:
            so_path.unlink()
        except FileNotFoundError:
            pass
    CompileStats.misses += 1
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        cpp = pathlib.Path(tmp) / "kernels.cpp"
        cpp.write_text(source)
        out = pathlib.Path(tmp) / "kernels.so"
        cmd = [CXX, *flags, str(cpp), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                "danlu_inductor: C++ compilation failed\n"
                f"command: {' '.join(cmd)}\n{proc.stderr[-4000:]}"
            )
        keep_src = folder / f"{key}.cpp"
        if not keep_src.exists():
            tmp_src = pathlib.Path(tmp) / "src.cpp"
            tmp_src.write_text(source)
            os.replace(tmp_src, keep_src)
        os.replace(out, so_path)  # atomic: readers see no file or the whole file
    CompileStats.seconds += time.perf_counter() - t0
    lib = _try_load(so_path, symbols)
    if lib is None:
        raise RuntimeError(f"danlu_inductor: built {so_path} but could not load it")
    return lib, so_path


def _try_load(path, symbols):
    try:
        lib = ctypes.CDLL(str(path))
        for s in symbols:
            getattr(lib, s)
        return lib
    except (OSError, AttributeError):
        return None
