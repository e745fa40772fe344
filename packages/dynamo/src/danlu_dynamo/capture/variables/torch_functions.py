"""torch-level callables: recorded as graph nodes, folded, or refused (effects outside the graph)."""

from __future__ import annotations

import sys
import types

import torch

from ..exc import Unsupported
from .base import ConstVar, Var
from .tensor import TensorVar


def _const_result(v):
    return lambda tx, *a, **k: ConstVar(v)


def _is_grad_enabled(tx):
    return ConstVar(torch.is_grad_enabled())


def _torch_is_tensor(tx, x):
    return ConstVar(isinstance(x, TensorVar))


def _torch_assert(tx, cond, msg=None):
    if cond.is_const():
        if not cond.const():
            raise Unsupported("torch._assert failed while tracing")
        return ConstVar(None)
    raise Unsupported("torch._assert on a tensor (data-dependent)")


def _set_grad_enabled(tx, mode):
    from .objects import GradModeVar

    g = GradModeVar(mode.const())
    # set_grad_enabled(b) switches immediately and can also be used as a context manager.
    g.enter(tx)
    g.entered_at_call = True
    return g


_TORCH_SPECIAL = {
    torch.is_grad_enabled: _is_grad_enabled,
    torch.is_tensor: _torch_is_tensor,
    torch._assert: _torch_assert,
    torch.get_default_dtype: lambda tx: ConstVar(torch.get_default_dtype()),
    torch.is_autocast_enabled: lambda tx, *a: ConstVar(
        torch.is_autocast_enabled(*[x.const() for x in a])
    ),
    torch.jit.is_scripting: _const_result(False),
    torch.jit.is_tracing: _const_result(False),
    torch._C._get_tracing_state: _const_result(None),
    torch.compiler.is_compiling: _const_result(True),
    torch.compiler.is_dynamo_compiling: _const_result(True),
    torch.set_grad_enabled: _set_grad_enabled,
}


def _fastpath_enabled(tx):
    v = torch.backends.mha.get_fastpath_enabled()
    tx.output.guards.add("GLOBAL_STATE", "", f"torch.backends.mha.get_fastpath_enabled() is {v!r}")
    return ConstVar(v)


_TORCH_SPECIAL[torch.backends.mha.get_fastpath_enabled] = _fastpath_enabled

# checkpoint's own keywords; anything else goes to the checkpointed function
_CHECKPOINT_OPTIONS = {"use_reentrant", "preserve_rng_state", "determinism_check", "debug"}


def _checkpoint(tx, function, *args, **kwargs):
    """Activation checkpointing: the function is traced into the graph as called directly.
    Run as a graph break instead, checkpoint would recompute eagerly in backward what the
    forward ran compiled (saving other tensors: torch refuses). Values and gradients are
    eager's; the memory checkpointing saves is not saved (the compiled graph keeps what
    its partition saves)."""
    if "context_fn" in kwargs:
        raise Unsupported("torch.utils.checkpoint with context_fn")
    kwargs = {k: v for k, v in kwargs.items() if k not in _CHECKPOINT_OPTIONS}
    return function.call(tx, list(args), kwargs)


try:
    import torch.utils.checkpoint as _checkpoint_mod

    _TORCH_SPECIAL[_checkpoint_mod.checkpoint] = _checkpoint
except ImportError:  # pragma: no cover - torch builds without it
    pass


def _grad_mode_clone(tx, obj):
    from .objects import grad_mode_clone

    return grad_mode_clone(tx, obj)


for _cls in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
    _TORCH_SPECIAL[_cls.clone] = _grad_mode_clone
_fx_wrapped = getattr(getattr(torch, "_utils", None), "is_compiling", None)
if _fx_wrapped is not None:
    _TORCH_SPECIAL[_fx_wrapped] = _const_result(True)

# Functions with effects outside the graph, or that call back into Python code.
_TORCH_DENY_PREFIXES = (
    "torch.autograd",
    "torch.random",
    "torch.cuda",
    "torch.utils.checkpoint",
    "torch.nn.init",
    "torch.distributed",
    "torch.func",
    "torch.backends",
    "torch.serialization",
    "torch.testing",
    "torch.profiler",
    "torch.utils.data",
    "torch.hub",
    "torch.overrides",
    "torch.fx",
    "torch.jit",
    "torch.library",
    "torch.cpu",
)
_TORCH_DENY_DOTTED = tuple(p + "." for p in _TORCH_DENY_PREFIXES)


def _internal(fn, mod: str) -> bool:
    """A Python function of a private torch module that its nearest public package does not
    export (``torch.pca_lowrank`` lives in ``torch._lowrank`` and is exported): torch's own
    machinery (its compilers, tracers and transforms), not an op to record."""
    if not isinstance(fn, types.FunctionType):
        return False
    parts = mod.split(".")
    private = [i for i, p in enumerate(parts) if p.startswith("_") and i > 0]
    if not private:
        return False
    public = sys.modules.get(".".join(parts[: private[0]]))
    return getattr(public, fn.__name__, None) is not fn


def _calls_back(args, kwargs) -> bool:
    """A Python function or module among the arguments: the torch function would run Python
    code of its own (checkpointing, tracing, exporting, functional transforms)."""
    for a in (*args, *kwargs.values()):
        try:
            t = a.python_type()
        except Exception:
            continue
        if isinstance(t, type) and issubclass(
            t, (types.FunctionType, types.MethodType, torch.nn.Module)
        ):
            return True
    return False


_TORCH_DENY = {
    torch.manual_seed,
    torch.seed,
    torch.set_default_dtype,
    torch.set_printoptions,
    torch.use_deterministic_algorithms,
    torch.equal,
    torch.allclose,
    torch.is_nonzero,
    torch.set_default_device,
    torch.set_num_threads,
    torch.save,
    torch.load,
    torch.vmap,
    torch.cond,
    torch.get_rng_state,
    torch.set_rng_state,
    torch.nonzero,
    torch.masked_select,
    torch.unique,
    torch.unique_consecutive,
    torch.bincount,
    torch.histc,
    torch.repeat_interleave,
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.__bool__,
}


# torch modules of plain Python helpers that are inlined rather than recorded as one node:
# context-manager decorators (``@torch.no_grad()`` wraps a function in ``decorate_context``,
# which enters a fresh context made by the manager's ``clone``).
_INLINED_TORCH_MODULES = {"torch.utils._contextlib"}


def is_torch_callable(fn) -> bool:
    mod = getattr(fn, "__module__", None) or ""
    if mod in _INLINED_TORCH_MODULES and isinstance(fn, types.FunctionType):
        return False
    if mod == "torch" or mod.startswith("torch.") or mod.startswith("torch._C"):
        return True
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        self_ = getattr(fn, "__self__", None)
        if isinstance(self_, types.ModuleType) and (self_.__name__.startswith("torch")):
            return True
        if (
            self_ is torch._C._VariableFunctions
            or type(self_).__name__ == "_VariableFunctionsClass"
        ):
            return True
    if isinstance(fn, torch._ops.OpOverloadPacket | torch._ops.OpOverload):
        return True
    return False


class TorchFnVar(Var):
    """A torch-level function: recorded as one graph node (``call_function``)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def is_const(self):
        return True

    def const(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def reconstruct(self, cg):
        f = self.fn
        return lambda ctx: f

    def __repr__(self):
        return f"TorchFn({getattr(self.fn, '__qualname__', self.fn)})"

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstVar(getattr(self.fn, name))
        raise Unsupported(f"attribute {name} of torch function")

    def call(self, tx, args, kwargs):
        fn = self.fn
        from .numpy_arrays import torch_call_with_arrays

        with_arrays = torch_call_with_arrays(tx, fn, args, kwargs)
        if with_arrays is not None:
            return with_arrays
        special = _TORCH_SPECIAL.get(fn)
        if special is not None:
            return special(tx, *args, **kwargs)
        mod = getattr(fn, "__module__", "") or ""
        if (
            fn in _TORCH_DENY
            or mod in _TORCH_DENY_PREFIXES
            or mod.startswith(_TORCH_DENY_DOTTED)
            or _internal(fn, mod)
            or _calls_back(args, kwargs)
        ):
            raise Unsupported(f"torch function {getattr(fn, '__qualname__', fn)} is not captured")
        if getattr(fn, "__wrapped__", None) is not None and not isinstance(
            fn, types.BuiltinFunctionType
        ):
            raise Unsupported(f"wrapped torch function {getattr(fn, '__qualname__', fn)}")
        if "out" in kwargs:
            raise Unsupported("out= arguments")
        if isinstance(fn, types.FunctionType) and fn.__qualname__ != fn.__name__:
            # a Python function defined in a class (a staticmethod such as
            # Transformer.generate_square_subsequent_mask): a graph names the functions it
            # calls by module and name, which would not find it; its body is traced instead
            from .functions import UserFunctionVar

            return UserFunctionVar(fn).call(tx, args, kwargs)
        return tx.output.call_op("call_function", fn, args, kwargs)


# Grad-mode context constructors.
def make_grad_ctx(cls, args, kwargs):
    from .objects import GradModeVar

    if cls is torch.no_grad:
        return GradModeVar(False)
    if cls is torch.enable_grad:
        return GradModeVar(True)
    raise Unsupported(f"context manager {cls.__name__}")


GRAD_CTX_CLASSES = (torch.no_grad, torch.enable_grad)
