"""Shared test helpers: trace to canonical ATen with danlu-primtorch, compile, compare."""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from danlu_inductor import compile_fx


def aten_graph(fn, *args):
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    with torch.no_grad():
        return trace(fn, *args, decompositions=decomposition_table())


def compile_fn(fn, *args):
    gm = aten_graph(fn, *args)
    flat = pytree.tree_leaves(list(args))
    return compile_fx(gm, flat), flat


def check_same(fn, *args, rtol=1.3e-6, atol=1e-5):
    compiled, flat = compile_fn(fn, *args)
    with torch.no_grad():
        expected = fn(*args)
    got = compiled(*flat)
    if isinstance(expected, torch.Tensor):
        got = got if isinstance(got, torch.Tensor) else got
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    return compiled
