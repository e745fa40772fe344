"""Whether calling a module runs anything besides its class's ``forward``: hooks on it, hooks
registered for every module, or a ``forward`` assigned on the instance.

Capture inlines only plain module calls, and the guards of a compiled frame check, on every
call, that each inlined module is still plain; both use these checks. They take the module's
``__dict__`` (the guard reads it once per module)."""

from __future__ import annotations

import torch

_module = torch.nn.modules.module


def hookless(d: dict) -> bool:
    """A module's ``__dict__`` holds no hooks."""
    return not (
        d["_forward_hooks"]
        or d["_forward_pre_hooks"]
        or d["_backward_hooks"]
        or d["_backward_pre_hooks"]
    )


def plain(d: dict) -> bool:
    """No hooks, and no ``forward`` of the instance's own."""
    return "forward" not in d and hookless(d)


def no_global_hooks() -> bool:
    """No hook registered for every module."""
    m = _module
    return not (
        m._global_forward_hooks
        or m._global_forward_pre_hooks
        or m._global_backward_hooks
        or m._global_backward_pre_hooks
    )
