"""Where a process's Triton kernels live on disk: the kernel modules danlu writes, and the
binaries Triton compiles from them (its own cache, ``TRITON_CACHE_DIR``, which the build
workers must share with the process that launches the kernels)."""

from __future__ import annotations

import os
import pathlib


def cache_root() -> pathlib.Path:
    """``$DANLU_CACHE_DIR/inductor/triton`` (default ``~/.cache/danlu``), created; sets
    ``TRITON_CACHE_DIR`` to its ``bin`` folder unless the user set it."""
    root = os.environ.get("DANLU_CACHE_DIR")
    base = pathlib.Path(root) if root else pathlib.Path.home() / ".cache" / "danlu"
    path = base / "inductor" / "triton"
    path.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_CACHE_DIR", str(path / "bin"))
    return path
