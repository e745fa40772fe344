"""Compile options: what ``compile_fx(..., options=...)`` and ``validate_options`` accept."""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, fields

# The compile modes (the one list: danlu.compile's `mode=` is checked against it) and the
# options each sets.
MODES = {
    None: {},
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True, "max_autotune": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}
MODE_MEANING = {
    "reduce-overhead": "CUDA graphs around the compiled calls",
    "max-autotune": "CUDA graphs, and Triton launch configurations chosen by timing",
    "max-autotune-no-cudagraphs": "Triton launch configurations chosen by timing",
}


def check_mode(mode) -> None:
    """Raise ``ValueError`` naming the valid modes unless ``mode`` is one."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(repr(m) for m in MODES)}")


OPTIONS = {
    "mode": "one of " + ", ".join(repr(m) for m in MODES) + " (sets the options below)",
    "cudagraphs": "bool: run each compiled CUDA graph as a CUDA graph replay (off by default)",
    "max_autotune": "bool: time every candidate launch config of each Triton kernel on its "
    "first GPU call, not only the first three (off by default)",
    "autotune": "bool: time a few launch configs of each Triton kernel on its first GPU "
    "call and remember the fastest on disk (on by default); off: the size heuristic alone",
    "pad_matmuls": "bool: zero-pad 16-bit matmuls whose rows are not a multiple of 16 bytes "
    "so the library takes its aligned kernels (Triton path; on by default)",
    "split_unaligned_columns": "bool: a 16-bit matmul misaligned in its columns only (a "
    "language-model head over a vocabulary of 50257) runs as two library calls writing "
    "into one buffer with padded rows, instead of padding a copy of the weight (Triton "
    "path; off by default until measured on a GPU)",
    "row_block_partials": "bool: a column sum beside a row reduction of the same values (a "
    "norm's weight gradient) takes its first stage in the row kernel, each program summing "
    "its block of rows (GPU graphs; on by default)",
    "group_input_kernels": "bool: pointwise kernels that read only graph inputs (a mixed-"
    "precision step's weight and bias casts) launch as one grouped kernel (GPU graphs; off "
    "by default until measured on a GPU)",
    "verify_ir": "bool: check the loop IR's well-formedness (indices within their buffers, "
    "reads after writes, consistent dtypes; ir/verify.py) before code generation; off by "
    "default, on for every compile when the environment sets DANLU_VERIFY_IR=1",
}


@dataclass(frozen=True)
class CompileOptions:
    cudagraphs: bool = False
    max_autotune: bool = False
    autotune: bool = True
    pad_matmuls: bool = True
    split_unaligned_columns: bool = False
    row_block_partials: bool = True
    group_input_kernels: bool = False
    verify_ir: bool = False
    mode: str | None = None


def validate_options(options) -> CompileOptions:
    """Check an options dict (names and values); -> the resolved ``CompileOptions``.

    Raises ``ValueError`` naming the valid options (or modes) for anything else."""
    if options is None:
        return CompileOptions()
    if isinstance(options, CompileOptions):
        return options
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        valid = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
        raise ValueError(f"unknown danlu_inductor option(s) {unknown}; valid options: {valid}")
    mode = options.get("mode")
    check_mode(mode)
    # every field but the mode is a bool option; its default is the dataclass's
    settings = {f.name: f.default for f in fields(CompileOptions) if f.name != "mode"}
    settings.update(MODES[mode])
    for key in settings:
        if key in options:
            if not isinstance(options[key], bool):
                raise ValueError(f"option {key!r} takes a bool, got {options[key]!r}")
            settings[key] = options[key]
    return CompileOptions(mode=mode, **settings)


class _VerifyState(threading.local):
    enabled = False


_verify = _VerifyState()


def verify_ir_enabled() -> bool:
    """Is the loop-IR checker on: the ``verify_ir`` option of the compile in progress, or
    ``DANLU_VERIFY_IR=1`` in the environment."""
    return _verify.enabled or os.environ.get("DANLU_VERIFY_IR", "0") not in ("", "0")


@contextlib.contextmanager
def verify_ir_scope(enabled: bool):
    """Turn the checker on for the compiles inside (never off: the environment wins)."""
    prev = _verify.enabled
    _verify.enabled = prev or bool(enabled)
    try:
        yield
    finally:
        _verify.enabled = prev
