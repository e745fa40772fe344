"""The functionalization and function tests again, traced with dynamic shapes: every
``aot_function`` they build gets ``dynamic=True`` (all sizes symbolic), and each check against
eager must still hold."""

from __future__ import annotations

import inspect

import pytest
import test_functionalization
import test_functions
import torch

import danlu_aotautograd as da

# Tests about the static path itself: they count one compilation per shape.
STATIC_ONLY = {"test_retrace_on_new_shapes_and_grad_modes"}

CASES = [
    (module, name)
    for module in (test_functionalization, test_functions)
    for name, fn in vars(module).items()
    if name.startswith("test_") and callable(fn) and name not in STATIC_ONLY
]


@pytest.mark.parametrize("module,name", CASES, ids=[f"{m.__name__}.{n}" for m, n in CASES])
def test_with_dynamic_shapes(monkeypatch, module, name):
    made = []
    static_aot_function = da.aot_function

    def dynamic_aot_function(fn, *args, **kwargs):
        kwargs.setdefault("dynamic", True)
        made.append(static_aot_function(fn, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(da, "aot_function", dynamic_aot_function)
    test = getattr(module, name)
    params = inspect.signature(test).parameters
    torch.manual_seed(hash(name) % 2**31)
    if "partition_fn" in params:
        for partition_fn in (da.default_partition, da.min_cut_partition):
            test(partition_fn)
    else:
        assert not params, f"{name} takes {list(params)}"
        test()
    traced = [c for f in made for c in f.compiled]
    if traced and any(f.dynamic_entries for f in made):  # some input had a symbolic size
        assert any(c.program.shape_env is not None for c in traced)
