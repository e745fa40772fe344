"""Prim meta functions and prim decompositions with symbolic sizes (torch's ShapeEnv as the
reference symbolic-shape engine): every direct decomposition sample traces with all dims
dynamic, and its sizes and strides, evaluated at the example sizes, are eager's."""

from __future__ import annotations

import pytest
import torch
from test_prim_decomp_direct import SAMPLES, TABLE, _ids
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)
from torch.utils._pytree import tree_flatten, tree_map


def _symbolic(mode, t):
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * t.dim())
    return mode.from_tensor(t, symbolic_context=ctx)


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES, ids=_ids())
def test_decomposition_with_symbolic_sizes(op, args, kwargs):
    expected = op(*args, **kwargs)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        fargs, fkwargs = tree_map(
            lambda x: _symbolic(mode, x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
        )
        actual = TABLE[op](*fargs, **fkwargs)
    for e, a in zip(tree_flatten(expected)[0], tree_flatten(actual)[0], strict=True):
        if isinstance(e, torch.Tensor):
            assert [int(s) for s in a.shape] == list(e.shape)
            assert a.dtype == e.dtype
            if e.numel() > 1:
                got = [(int(n), int(s)) for n, s in zip(a.shape, a.stride()) if int(n) > 1]
                assert got == [(n, s) for n, s in zip(e.shape, e.stride()) if n > 1]


def test_symbolic_scalars_stay_symbolic():
    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = _symbolic(mode, torch.randn(4, 6))
    with mode:
        n = x.shape[0]
        r = TABLE[torch.ops.aten.arange.start_step](0, n, 1)
        s = TABLE[torch.ops.aten.add.Tensor](x, n)
        f = TABLE[torch.ops.aten.full.default]([n, 2], x.shape[1])
    assert isinstance(r.shape[0], torch.SymInt) and str(r.shape[0]) == str(n)
    assert s.dtype == torch.float32 and str(s.shape[0]) == str(n)
    assert f.dtype == torch.int64 and str(f.shape[0]) == str(n)
