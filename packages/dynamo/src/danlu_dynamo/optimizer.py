"""``optimize(backend)``: wrap a function or an nn.Module so that calls run through capture."""

from __future__ import annotations

import functools
import inspect
import types

import torch

from . import config, eval_frame
from .backends import lookup_backend
from .bytecode_path import HOOK_CACHE_LIMIT
from .bytecode_path import callback as hook_callback
from .capture.module_hooks import no_global_hooks, plain
from .capture_context import CaptureContext, thread_state
from .segments.hook_entry import callback as segment_hook_callback
from .segments.runner import capturable, run_function


def _run(ctx, fn, args, kwargs):
    if config.capture_path == "bytecode":
        return _run_hooked(ctx, fn, args, kwargs)
    if not config.use_frame_hook:
        return run_function(ctx, fn, args, kwargs)
    prev_ctx = thread_state.ctx
    thread_state.ctx = ctx
    prev = eval_frame.set_eval_frame(segment_hook_callback)
    try:
        return fn(*args, **kwargs)
    finally:
        eval_frame.set_eval_frame(prev)
        thread_state.ctx = prev_ctx


_set_eval_frame = None
_hook_callback = None


def _run_hooked(ctx, fn, args, kwargs):
    """The frame hook sees ``fn``'s frame (and every frame it starts): a cache hit runs the
    transformed code, a miss traces (``bytecode_path.callback``)."""
    prev_ctx = thread_state.ctx
    thread_state.ctx = ctx
    prev = _set_eval_frame(_hook_callback)
    try:
        return fn(*args, **kwargs)
    finally:
        _set_eval_frame(prev)
        thread_state.ctx = prev_ctx


def _load_hook():
    global _set_eval_frame, _hook_callback
    _set_eval_frame, _hook_callback = eval_frame.set_eval_frame, hook_callback
    if eval_frame.get_cache_limit() < HOOK_CACHE_LIMIT:
        eval_frame.set_cache_limit(HOOK_CACHE_LIMIT)
    for f in (_run_hooked, OptimizedModule.forward, _plain_forward, plain, no_global_hooks):
        eval_frame.mark_skip(f.__code__)


_contexts: list = []


def _plain_forward(mod):
    """``type(mod).forward`` when calling it is what ``mod(...)`` does: no hooks anywhere and
    no instance-level ``forward``; else None."""
    if plain(mod.__dict__) and no_global_hooks():
        fwd = inspect.getattr_static(type(mod), "forward", None)
        if isinstance(fwd, types.FunctionType):  # not a staticmethod/classmethod: mod(...)
            return fwd
    return None


class OptimizedModule(torch.nn.Module):
    """What compiling a module returns (``optimize(...)(mod)``, ``danlu.compile(mod)``): calls run
    the module through capture; everything else is the original module's. Its parameters,
    ``state_dict``/``load_state_dict`` (without a prefix), attribute reads and writes and
    ``train()``/``eval()`` fall through to the original, kept at ``_orig_mod``.

    ``call``: a callable to run instead of the module's own ``forward`` under capture (danlu
    compiles torch's own container modules through a plain entry function)."""

    _OWN = ("_orig_mod", "_capture_ctx", "_call")

    def __init__(self, mod: torch.nn.Module, ctx: CaptureContext, call=None):
        super().__init__()
        self._capture_ctx = ctx
        self._call = call
        self.__dict__["_mod"] = mod  # read without Module.__getattr__
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        if self._call is not None:
            return self._call(*args, **kwargs)
        mod = self._mod
        ctx = self._capture_ctx
        if config.capture_path == "bytecode":
            # The hook sees forward's frame; with hooks, Module.__call__ runs them eagerly
            # and the hook sees their frames too.
            fwd = _plain_forward(mod)
            prev_ctx = thread_state.ctx
            thread_state.ctx = ctx
            prev = _set_eval_frame(_hook_callback)
            try:
                if fwd is not None:
                    return fwd(mod, *args, **kwargs)
                return mod(*args, **kwargs)
            finally:
                _set_eval_frame(prev)
                thread_state.ctx = prev_ctx
        target = capturable(mod)
        if target is None:  # hooks or a non-Python forward: run the module eagerly
            return mod(*args, **kwargs)
        f, pre = target
        return _run(ctx, f, [*pre, *args], kwargs)

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name, value):
        if name in self._OWN or "_orig_mod" not in self.__dict__.get("_modules", {}):
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def train(self, mode: bool = True):
        self._orig_mod.train(mode)
        return self

    @property
    def training(self):
        return self._modules["_orig_mod"].training if "_modules" in self.__dict__ else True

    @training.setter
    def training(self, value):
        # nn.Module.__init__ sets self.training before _orig_mod exists
        if "_orig_mod" in self.__dict__.get("_modules", {}):
            self._orig_mod.training = value

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"


class _Optimizer:
    def __init__(self, backend, fullgraph, dynamic=None):
        self.ctx = CaptureContext(lookup_backend(backend), fullgraph=fullgraph, dynamic=dynamic)
        _contexts.append(self.ctx)

    def __call__(self, fn):
        ctx = self.ctx
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, ctx)
        if isinstance(fn, types.MethodType):
            func, self_ = fn.__func__, fn.__self__

            @functools.wraps(func)
            def bound(*args, **kwargs):
                return _run(ctx, func, [self_, *args], kwargs)

            bound._capture_ctx = ctx
            return bound
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"optimize() expects a function or nn.Module, got {type(fn).__name__}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if config.capture_path != "bytecode":
                return _run(ctx, fn, args, kwargs)
            prev_ctx = thread_state.ctx
            thread_state.ctx = ctx
            prev = _set_eval_frame(_hook_callback)
            try:
                return fn(*args, **kwargs)
            finally:
                _set_eval_frame(prev)
                thread_state.ctx = prev_ctx

        wrapper._capture_ctx = ctx
        wrapper._orig_fn = fn
        eval_frame.mark_skip(wrapper.__code__)
        return wrapper


def optimize(backend="eager", *, fullgraph: bool = False, dynamic=None):
    """``optimize(backend)(fn_or_module)``: capture graphs and hand them to ``backend``.

    ``backend`` is a callable ``backend(gm, example_inputs) -> callable`` or a registered name
    (``"eager"``).  ``fullgraph=True`` raises ``GraphBreakError`` instead of breaking the graph.
    ``dynamic``: None (default) compiles with static sizes first and, when an input size
    changes, recompiles once with that dimension symbolic ("automatic dynamic"); True makes
    every input size symbolic from the start; False always specialises. See
    ``capture/dynamic.py`` and ``mark_dynamic``/``mark_static``.
    """
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    return _Optimizer(backend, fullgraph, dynamic)


def reset():
    """Drop every compiled segment and cache, and the frame hook's cache entries."""
    for ctx in _contexts:
        ctx.reset()
    eval_frame.reset()
    _load_hook()


_load_hook()
