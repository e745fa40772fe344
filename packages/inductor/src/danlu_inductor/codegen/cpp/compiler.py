"""gcc -> shared library -> ctypes, behind an on-disk cache.

Key: sha256 of (source, flags, compiler version). Entries are written to a temporary name and
renamed into place (atomic on POSIX), so concurrent writers never expose a half-written
library; an entry that fails to load or lacks its symbols is deleted and rebuilt.

Many kernels compile in parallel: the kernels are split into one translation unit per worker
(each starting with the prelude), `g++ -c` runs on each in a thread pool (the threads only
wait on the compiler processes) and one link step makes the library.
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
from concurrent.futures import ThreadPoolExecutor

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
    # nothing enables floating-point traps, so selects on a comparison may become blends:
    # ReLU-backward `where`s fed to a double-accumulated sum stayed a branch per element
    # (ResNet-18's stem batch-norm gradient sum: 4.6 -> 0.19 ms on random data). Values and
    # NaN handling are unchanged; only the assumption that an operation may trap is dropped.
    "-fno-trapping-math",
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
    units = 0  # translation units compiled by the last miss


_lock = threading.Lock()


def cache_key(source: str, flags: list[str]) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_version()):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


MIN_KERNELS_PER_UNIT = 4  # below this a second g++ start-up costs more than it saves


def compile_workers() -> int:
    env = os.environ.get("DANLU_COMPILE_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def split_units(kernel_sources: list[str], workers: int) -> list[list[str]]:
    """Kernels dealt into at most ``workers`` groups of similar total source length (a
    proxy for compile time), keeping their order inside each group."""
    n = min(workers, len(kernel_sources) // MIN_KERNELS_PER_UNIT)
    if n <= 1:
        return [list(kernel_sources)]
    load = [0] * n
    owner = [0] * len(kernel_sources)
    for i in sorted(range(len(kernel_sources)), key=lambda i: -len(kernel_sources[i])):
        u = min(range(n), key=load.__getitem__)
        owner[i] = u
        load[u] += len(kernel_sources[i])
    units = [[] for _ in range(n)]
    for i, src in enumerate(kernel_sources):
        units[owner[i]].append(src)
    return [u for u in units if u]


def compile_kernels(
    prelude: str, kernel_sources: list[str], symbols: list[str]
) -> tuple[ctypes.CDLL, pathlib.Path, str]:
    """One library holding every kernel; on a cache miss the kernels compile in parallel.
    Returns the library, its path and the whole source (the cache key's text)."""
    source = prelude + "\n" + "\n".join(kernel_sources)
    units = split_units(kernel_sources, compile_workers())
    if len(units) == 1:
        lib, path = compile_library(source, symbols)
    else:
        lib, path = compile_library(
            source, symbols, units=[prelude + "\n" + "\n".join(u) for u in units]
        )
    return lib, path, source


def compile_library(
    source: str, symbols: list[str], units: list[str] | None = None
) -> tuple[ctypes.CDLL, pathlib.Path]:
    """The loaded library for ``source`` (compiled now or found in the cache). ``units``, if
    given, are translation units that together define what ``source`` defines; they are
    compiled in parallel and linked instead of compiling ``source`` in one run."""
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
    CompileStats.units = 1 if units is None else len(units)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        out = pathlib.Path(tmp) / "kernels.so"
        if units is None:
            cpp = pathlib.Path(tmp) / "kernels.cpp"
            cpp.write_text(source)
            _run([CXX, *flags, str(cpp), "-o", str(out)])
        else:
            objects = []
            cmds = []
            for i, unit in enumerate(units):
                cpp = pathlib.Path(tmp) / f"unit{i}.cpp"
                cpp.write_text(unit)
                obj = pathlib.Path(tmp) / f"unit{i}.o"
                objects.append(str(obj))
                compile_flags = [f for f in flags if f != "-shared"]
                cmds.append([CXX, *compile_flags, "-c", str(cpp), "-o", str(obj)])
            with ThreadPoolExecutor(max_workers=len(cmds)) as pool:
                for _ in pool.map(_run, cmds):
                    pass
            _run([CXX, *flags, *objects, "-o", str(out)])
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


def _run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            "danlu_inductor: C++ compilation failed\n"
            f"command: {' '.join(cmd)}\n{proc.stderr[-4000:]}"
        )


def _try_load(path, symbols):
    try:
        lib = ctypes.CDLL(str(path))
        for s in symbols:
            getattr(lib, s)
        return lib
    except (OSError, AttributeError):
        return None
