"""Example values for traced tensors: ``danlu_primtorch``'s fake tensors.

Graph inputs become fakes through ``FakeTensorMode.from_real`` (same sizes, strides, storage
aliasing, device, requires_grad) and every traced op runs inside the mode, so node.meta["val"]
is a ``FakeTensor``. An op whose output depends on data (``DataDependentOutputError``), that
has no fake implementation, or that raises, becomes a graph break: the op then runs eagerly,
which gives the user eager's behaviour (including its error, if any).
"""

from __future__ import annotations

import torch

from danlu_primtorch.fake import FakeTensorMode

from .exc import Unsupported


def new_mode(shape_env=None) -> FakeTensorMode:
    return FakeTensorMode(shape_env=shape_env)


def to_fake(mode: FakeTensorMode, t: torch.Tensor, dims=None, source=None) -> torch.Tensor:
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {type(t).__name__}")
    if t.layout != torch.strided:
        raise Unsupported(f"non-strided tensor input ({t.layout})")
    try:
        if dims:  # symbolic sizes for these dims (``dynamic.py``)
            return mode.from_real(t, dynamic_dims=dims, source=source)
        return mode.from_real(t)
    except Exception as e:
        raise Unsupported(f"cannot make a fake tensor: {_short(e)}") from e


def run_fake(mode: FakeTensorMode, fn, args, kwargs):
    """Run ``fn`` on fake example values (args/kwargs already hold fakes)."""
    try:
        try:
            with mode:
                result = fn(*args, **kwargs)
        except Exception:
            cast = _autocast_retry(fn, args, kwargs, mode)
            if cast is None:
                raise
            with mode:
                result = fn(*cast[0], **cast[1])
        if torch._C._is_any_autocast_enabled():
            from .autocast_probe import autocast_dtypes, cast_to

            dtypes = autocast_dtypes(fn, args, kwargs, result)
            if dtypes is not None:
                result = cast_to(result, dtypes, mode)
        return result
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {_short(e)}") from e


def _autocast_retry(fn, args, kwargs, mode):
    """Under autocast, the arguments as autocast would cast them (None when autocast is off or
    cannot be probed): the first run on the uncast fakes failed."""
    if not torch._C._is_any_autocast_enabled():
        return None
    from .autocast_probe import autocast_inputs

    try:
        return autocast_inputs(fn, args, kwargs, mode)
    except Exception:  # the probe fails too: report the first error
        return None


def _short(e) -> str:
    s = str(e).strip().splitlines()
    return s[0][:200] if s else type(e).__name__
