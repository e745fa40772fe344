"""Shared harness for the user-object tests: eager vs captured on fresh random inputs, with
results, inputs and objects compared after the call, and the graphs and breaks counted."""

from __future__ import annotations

import copy
import dataclasses
import types

import torch
from _programs_common import fresh_seed

import danlu_dynamo

_OPAQUE = (types.FunctionType, types.MethodType, types.ModuleType, torch.nn.Module)


def snapshot(x, _seen=None):
    """A comparable picture of ``x``: tensors cloned, objects as (type name, their __dict__),
    class-level state included where asked (``dict`` of a class's own vars)."""
    _seen = {} if _seen is None else _seen
    if isinstance(x, torch.Tensor):
        return ("tensor", x.dtype, tuple(x.shape), x.requires_grad, x.detach().clone())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [snapshot(v, _seen) for v in x])
    if isinstance(x, dict):
        return ("dict", {k: snapshot(v, _seen) for k, v in x.items()})
    if isinstance(x, type):
        return ("class", x.__qualname__)
    if hasattr(x, "__dict__") and not isinstance(x, _OPAQUE):
        if id(x) in _seen:
            return ("seen", _seen[id(x)])
        _seen[id(x)] = len(_seen)
        return (type(x).__qualname__, {k: snapshot(v, _seen) for k, v in vars(x).items()})
    return (type(x).__name__, x)


def same_snapshot(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(torch.equal(a, b) or torch.allclose(a, b, equal_nan=True))
        )
    if isinstance(a, (list, tuple)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same_snapshot(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, dict):
        return (
            type(b) is dict and a.keys() == b.keys() and all(same_snapshot(a[k], b[k]) for k in a)
        )
    return type(a) is type(b) and a == b


class Counter:
    """A backend that counts the graphs it is given and runs them as they are."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def check(fn, make_args, calls=3, state=None, backend=None):
    """Run ``fn`` eagerly and captured on the same fresh inputs ``calls`` times.

    ``make_args(gen)`` returns the argument tuple (deep-copied for each side); ``state()``,
    when given, returns the program's outside state (class attributes, globals) and
    ``state(reset=True)`` puts it back before each side runs. Returns (optimized fn, counter).
    """
    counter = backend or Counter()
    opt = danlu_dynamo.optimize(counter)(fn)
    for _ in range(calls):
        seed = fresh_seed()
        args = make_args(torch.Generator().manual_seed(seed))
        args_e, args_c = copy.deepcopy(args), copy.deepcopy(args)
        if state is not None:
            state(reset=True)
        try:
            expected = ("ok", fn(*args_e))
        except Exception as e:  # noqa: BLE001 - the compiled side must raise the same
            expected = ("raise", type(e), str(e))
        state_e = state() if state is not None else None
        if state is not None:
            state(reset=True)
        try:
            got = ("ok", opt(*args_c))
        except Exception as e:  # noqa: BLE001
            got = ("raise", type(e), str(e))
        state_c = state() if state is not None else None
        if expected[0] == "raise":
            assert got == expected, f"seed={seed}: {got} != {expected}"
        else:
            assert got[0] == "ok", f"seed={seed}: compiled raised {got}"
            se, sg = snapshot(expected[1]), snapshot(got[1])
            assert same_snapshot(se, sg), f"seed={seed}\nexpected={se}\ngot={sg}"
        assert same_snapshot(snapshot(args_e), snapshot(args_c)), f"seed={seed}: inputs differ"
        assert same_snapshot(snapshot(state_e), snapshot(state_c)), (
            f"seed={seed}: state {state_e} != {state_c}"
        )
    internal = [r for r in opt._capture_ctx.eager_reasons if "internal capture error" in r]
    assert not internal, internal
    return opt, counter


def breaks(opt):
    return [b.reason for b in opt._capture_ctx.breaks]


__all__ = ["Counter", "breaks", "check", "dataclasses", "same_snapshot", "snapshot"]
