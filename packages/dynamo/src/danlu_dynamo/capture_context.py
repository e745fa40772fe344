"""What both capture paths share: the capture context of an ``optimize()`` call, the thread's
active context, the graph-break record, and which frames capture takes.

The bytecode path (``bytecode_path.py``) and the segment path (``segments/``) import this
module; it imports neither of them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import logging
import os
import sys
import threading
import types

from . import eval_frame as ef

# The log topics both capture paths write (``danlu.config`` / ``DANLU_LOGS`` name them).
log = logging.getLogger("danlu_dynamo")
log_breaks = logging.getLogger("danlu_dynamo.graph_breaks")
log_recompiles = logging.getLogger("danlu_dynamo.recompiles")
log_guards = logging.getLogger("danlu_dynamo.guards")
log_graph = logging.getLogger("danlu_dynamo.graph")

# Times a frame's trace may start over (a graph break found late, a value to specialise on).
MAX_RESTARTS = 16
# Frames neither path captures: generators and coroutines run as they are.
SKIP_CODE_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class CaptureContext:
    """One ``optimize(...)`` call: backend, options, caches, and what explain reports."""

    def __init__(self, backend, fullgraph=False, dynamic=None):
        from .distributed import ddp_split_backend

        # graphs captured inside a DistributedDataParallel forward are split at its buckets
        self.ddp_splits: list = []
        self.backend = ddp_split_backend(backend, self.ddp_splits)
        self.fullgraph = fullgraph
        self.dynamic = dynamic  # None (automatic) | True | False: see capture/dynamic.py
        # (code, offset) -> {input source: (sizes seen, dims made dynamic)}
        self.size_memory: dict = {}
        self.recompiles: list[str] = []  # why each recompile happened (explain)
        self.caches: dict = {}  # code -> the segment path's per-offset cache
        self.records: list = []  # entries (bytecode path) and segments compiled, in order
        self.breaks: list[GraphBreak] = []
        self.eager_reasons: list[str] = []
        self.fallbacks: list[str] = []  # frames the bytecode path handed to the segment path
        self.entry_counts: dict = {}  # frame-hook entries made per code object
        self.lock = threading.RLock()

    def reset(self):
        self.ddp_splits.clear()
        self.caches.clear()
        self.records.clear()
        self.breaks.clear()
        self.eager_reasons.clear()
        self.fallbacks.clear()
        self.entry_counts.clear()
        self.size_memory.clear()
        self.recompiles.clear()

    def dynamic_policy(self, code, offset):
        from .capture.dynamic import DynamicPolicy

        return DynamicPolicy(self.dynamic, self.size_memory.setdefault((code, offset), {}))


class GraphBreak:
    """One graph break, for explain and logs."""

    def __init__(self, reason, user_loc, code, offset):
        self.reason, self.user_loc, self.code, self.offset = reason, user_loc, code, offset

    def __str__(self):
        return f"{self.user_loc}: {self.reason}"


class _ThreadState(threading.local):
    ctx = None  # the CaptureContext whose compiled call runs on this thread, or None


# Read as ``thread_state.ctx`` by every cache entry's check function: kept an attribute read,
# not a call, on the hit path.
thread_state = _ThreadState()


def current_context() -> CaptureContext | None:
    return thread_state.ctx


def code_location(code) -> str:
    return f"{code.co_filename}:{code.co_firstlineno} ({code.co_name})"


# ------------------------------------------------------------------ which code is the user's

_LIBRARY_PACKAGES = (
    "torch",
    "danlu_dynamo",
    "danlu_primtorch",
    "danlu_aotautograd",
    "danlu_inductor",
)
_library_dirs: tuple[str, ...] | None = None


def library_dirs() -> tuple[str, ...]:
    """The directories of torch and danlu's capture packages, each ending in a separator.

    Found from the packages themselves, not from a path pattern: an environment installed
    under a path containing ``/torch/`` (the GPU machine's ``/opt/torch/.venv``) made every
    installed package (transformers included) look like torch to a ``"/torch/" in path`` test."""
    global _library_dirs
    if _library_dirs is None:
        dirs = set()
        for name in _LIBRARY_PACKAGES:
            spec = importlib.util.find_spec(name)
            for loc in (spec.submodule_search_locations or []) if spec else []:
                for d in {os.path.abspath(loc), os.path.realpath(loc)}:
                    dirs.add(os.path.join(d, ""))
        _library_dirs = tuple(sorted(dirs))
    return _library_dirs


def is_user_code(code) -> bool:
    fname = code.co_filename
    if fname.startswith(("<frozen", "<eval_with_key", "<danlu")):
        return False
    if fname.startswith(library_dirs()) or os.path.abspath(fname).startswith(library_dirs()):
        return False
    if fname.startswith(sys.base_prefix + "/lib/python") and "-packages" not in fname:
        return False  # the standard library (site-packages / dist-packages are not)
    return True


_LIBRARY_ROOTS = set(sys.stdlib_module_names) | {
    "torch",
    "danlu",
    "danlu_dynamo",
    "danlu_primtorch",
    "danlu_aotautograd",
    "danlu_inductor",
    "numpy",
    "pytest",
    "_pytest",
    "pluggy",
    "typing_extensions",
    "sympy",
    "triton",
    "_distutils_hack",
    "setuptools",
    "pkg_resources",
    "importlib_metadata",
    "xdist",
    "execnet",
}


def wants_frame(frame) -> bool:
    """Whether the frame hook captures this frame: user code only, never the standard library,
    torch, danlu itself, or code generated by them (namedtuple constructors, FX graph code),
    nor the set-up methods of dict dataclasses (below)."""
    code = frame.f_code
    if not is_user_code(code):
        return False
    mod = frame.f_globals.get("__name__") or ""
    root = mod.partition(".")[0]
    if root in _LIBRARY_ROOTS or mod.startswith("namedtuple_"):
        return False
    return not sets_up_dict_dataclass(frame)


# Methods that fill in or mutate an object rather than compute with it.
_SET_UP_METHODS = frozenset(
    {"__init__", "__post_init__", "__setattr__", "__setitem__", "__delattr__", "__delitem__"}
)


def sets_up_dict_dataclass(frame) -> bool:
    """A set-up method of a dict-subclass dataclass (transformers' ``ModelOutput``: the
    dataclass-generated ``__init__``, ``__post_init__``, ``__setattr__``...) on an existing
    instance. Traced code builds such objects in one step (``_model_output``) and never enters
    these frames; the hook only sees them where the constructor runs in plain Python (the rest
    of a frame after a break). Traced on their own they would break at every attribute store
    on the real object and record no tensor operation, so they run as plain Python."""
    code = frame.f_code
    if code.co_name not in _SET_UP_METHODS or not code.co_argcount:
        return False
    try:
        obj = frame.f_locals.get(code.co_varnames[0])
    except Exception:
        return False
    cls = type(obj)
    if not (isinstance(obj, dict) and dataclasses.is_dataclass(cls)):
        return False
    for klass in cls.__mro__:  # the method must be the instance's own (through its MRO)
        fn = klass.__dict__.get(code.co_name)
        if getattr(fn, "__code__", None) is code:
            # Its comprehensions are frames of their own before 3.12 (PEP 709): plain too.
            _skip_nested(code)
            return True
    return False


def _skip_nested(code) -> None:
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            ef.mark_skip(c)
            _skip_nested(c)
