"""torch.nn modules constructed inside traced code (``loss_fct = CrossEntropyLoss()``).

A module is accepted when its class is one of torch.nn's own (defined in ``torch.nn.modules``,
not a container), every constructor argument is a constant, and the object holds no parameter,
buffer, submodule or hook once ``__init__`` has run. Its state is then a pure function of the
class and the arguments, so the real object is built at trace time (``__init__`` runs eagerly,
no tensor work) and calls inline its ``forward`` on that object.

The object is never written to in the trace (attribute writes break), so when it is live after
the graph (returned, stored, a local at a later break) the run builds a fresh one from the
same arguments: eager code also makes a new object on every call.
"""

from __future__ import annotations

import torch

from ..exc import Unsupported
from .base import is_const_value
from .objects import ModuleVar

# torch.nn classes meant to be filled in after construction, or without a forward of their own.
_DENIED = (
    torch.nn.Sequential,
    torch.nn.ModuleList,
    torch.nn.ModuleDict,
    torch.nn.ParameterList,
    torch.nn.ParameterDict,
)


def construct_module(tx, cls, args, kwargs):
    """``cls(*args, **kwargs)`` for an nn.Module class met in the trace."""
    name = cls.__name__
    if not _torch_nn_class(cls):
        raise Unsupported(f"constructing module {name} in the traced code")
    if not all(a.is_const() for a in args) or not all(v.is_const() for v in kwargs.values()):
        raise Unsupported(f"constructing module {name} with non-constant arguments")
    vals = [a.const() for a in args]
    kvals = {k: v.const() for k, v in kwargs.items()}
    if not all(is_const_value(v) for v in [*vals, *kvals.values()]):
        raise Unsupported(f"constructing module {name} with non-constant arguments")
    if "device" in kvals or any(isinstance(v, torch.device) for v in [*vals, *kvals.values()]):
        raise Unsupported(f"constructing module {name} on a device")
    try:
        # A probe on the meta device first: a module with state would otherwise allocate
        # and draw from the random generator here, and again when the break runs it eagerly.
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            probe = cls(*vals, **kvals)
        if _holds_state(probe):
            raise Unsupported(f"constructing module {name} with parameters, buffers or submodules")
        mod = cls(*vals, **kvals)
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"{type(e).__name__} constructing module {name}: {e}") from e
    if _holds_state(mod):
        raise Unsupported(f"constructing module {name} with parameters, buffers or submodules")
    return FreshModuleVar(mod, vals, kvals)


def _torch_nn_class(cls) -> bool:
    mod = getattr(cls, "__module__", "") or ""
    return (
        type(cls) is type
        and mod.startswith("torch.nn.modules.")
        and mod != "torch.nn.modules.module"
        and not issubclass(cls, _DENIED)
        and getattr(torch.nn.modules, cls.__name__, None) is cls
    )


def _holds_state(mod) -> bool:
    d = mod.__dict__
    if any(p is not None for p in d.get("_parameters", {}).values()):
        return True
    if any(b is not None for b in d.get("_buffers", {}).values()):
        return True
    if d.get("_modules"):
        return True
    hooks = [k for k, v in d.items() if "hook" in k and v]
    return bool(hooks) or any(isinstance(v, torch.Tensor) for v in d.values())


class FreshModuleVar(ModuleVar):
    """A state-free torch.nn module built in the trace; its attributes are constants."""

    def __init__(self, module, args, kwargs):
        super().__init__(module, None)
        self.ctor_args = args
        self.ctor_kwargs = kwargs

    def getattr(self, tx, name):
        d = self.value.__dict__
        if name in d and not is_const_value(d[name]):
            # the attribute tables and hook dicts: reading them could lead to writes
            raise Unsupported(f"attribute {name!r} of module {self.cls.__name__} made in the trace")
        return super().getattr(tx, name)

    def setattr(self, tx, name, value):
        raise Unsupported(
            f"setting attribute {name!r} on module {self.cls.__name__} made in the trace"
        )

    def delattr(self, tx, name):
        raise Unsupported(
            f"deleting attribute {name!r} of module {self.cls.__name__} made in the trace"
        )

    def reconstruct(self, cg):
        cls, a, k = self.cls, self.ctor_args, self.ctor_kwargs
        return lambda ctx: cls(*a, **k)  # once per run (the rebuilder memoizes it)

    def __repr__(self):
        return f"FreshModule({self.cls.__name__})"
