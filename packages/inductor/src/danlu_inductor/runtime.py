"""Small helpers the generated wrapper modules call at run time."""

from __future__ import annotations

import importlib

import torch

# Tensor types whose Python methods are torch's own (no __torch_function__ of their own): the
# C++ helpers read and view these directly; anything else goes through torch.
PLAIN_TENSOR_TYPES = tuple(
    t
    for t in (torch.Tensor, torch.nn.Parameter, getattr(torch.nn, "Buffer", None))
    if isinstance(t, type)
)


def _view_through_torch(t, size, stride, offset):
    return torch.as_strided(t, size, stride, t.storage_offset() + offset)


def _empty_through_torch(size, stride, dtype, device):
    return torch.empty_strided(size, stride, dtype=dtype, device=device)


def extension(name: str):
    """The optional C++ extension ``danlu_inductor.<name>``, or None where it was not built
    or was built against another torch (its ABI would not match)."""
    try:
        module = importlib.import_module(f"danlu_inductor.{name}")
    except ImportError:
        return None
    return module if module.TORCH_VERSION == torch.__version__ else None


def _bind_buffers():
    """``(view, empty)`` for the generated wrappers: ``_buffers``' (C++) where it was built
    against this torch, else the same calls through torch.

    ``view(t, size, stride, offset)`` is t's storage with these sizes and strides from
    ``offset`` elements after t's first element, with no autograd history: the wrappers use
    it for the arguments of library calls that write none of them. ``empty(size, stride,
    dtype, device)`` is ``torch.empty_strided``. Through torch each costs about 1.1 us of
    argument parsing and dispatch, in C++ 0.2-0.5 us; a wrapper makes hundreds a call."""
    _buffers = extension("_buffers")
    if _buffers is None:
        return _view_through_torch, _empty_through_torch
    _buffers.bind(PLAIN_TENSOR_TYPES, _view_through_torch, _empty_through_torch)
    return _buffers.view, _buffers.empty


view, empty = _bind_buffers()


def direct_op(op):
    """An ATen operator's C entry point (``OpOverload._op``): the same call without the
    Python frame of ``OpOverload.__call__``, about a third of an extern call's host time."""
    return getattr(op, "_op", op)


def ensure_layout(t: torch.Tensor, size: tuple, stride: tuple) -> torch.Tensor:
    """``t`` itself when it has the layout the kernels were built for, else a copy that has it."""
    if t.stride() == stride and t.shape == size:
        return t
    if tuple(t.shape) == size and all(
        n == 1 or a == b for n, a, b in zip(size, t.stride(), stride)
    ):  # a size-1 dim's stride is never used
        return t
    if tuple(t.shape) != size:
        raise ValueError(
            f"compiled graph expects an input of shape {size}, got {tuple(t.shape)}; "
            "recompile for new shapes"
        )
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def extern_layout(t, size: tuple, stride: tuple):
    """A library kernel's output in the layout planned for it (``ensure_layout``); outputs the
    kernel leaves undefined at run time (None, such as attention's debug mask) stay None."""
    return t if t is None else ensure_layout(t, size, stride)


class ProgramIndexError(IndexError):
    """An index the program itself got wrong (out of range in a gather or embedding), as eager
    reports it: the program's error, not the compiler's, so nothing falls back on it (an eager
    rerun on CUDA would trip a device-side assert and end the process's CUDA context)."""

    program_error = True


class KernelLaunchError(RuntimeError):
    """A generated kernel failed on its first launch (compilation on first use)."""


def raise_index_error(kernel: str):
    raise ProgramIndexError(f"index out of range in a gather/embedding (kernel {kernel})")


class FlagWatch:
    """Reads a device-side error flag (set by gather kernels on an out-of-range index)
    without stalling the host on every call.

    The flag is sticky: kernels only ever set it, so nothing is lost between reads. On CUDA,
    ``check`` copies it into pinned host memory behind an event and looks at the copy once
    the event has completed, usually at the end of the next call: like eager's device-side
    asserts, an error is reported a little after the call that caused it. ``check_now``
    reads it synchronously (first calls, and devices without streams).
    """

    MESSAGE = "index out of range in a gather/embedding"

    def __init__(self, flag: torch.Tensor):
        self.flag = flag
        self.async_reads = flag.is_cuda
        if self.async_reads:
            self.host = torch.zeros((), dtype=flag.dtype).pin_memory()
            self.event = torch.cuda.Event()
        self.in_flight = False

    def check_now(self, where: str = ""):
        if self.flag.item():
            self.flag.zero_()
            raise ProgramIndexError(self.MESSAGE + where)

    def check(self, where: str = ""):
        if not self.async_reads:
            return self.check_now(where)
        if self.in_flight and self.event.query():
            self.in_flight = False
            if self.host.item():
                self.flag.zero_()
                raise ProgramIndexError(
                    self.MESSAGE + where + " (seen after the call that caused it)"
                )
        if not self.in_flight:
            self.host.copy_(self.flag, non_blocking=True)
            self.event.record()
            self.in_flight = True
