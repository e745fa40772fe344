"""Shared harness for the capture program suite: eager vs captured through the "eager" backend."""

from __future__ import annotations

import dataclasses
import os

import torch

import danlu_dynamo


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def same(a, b) -> bool:
    """Bit-identical structure and values (tensors: dtype, shape, values incl. NaN placement)."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return False
        if a.dtype != b.dtype or a.shape != b.shape or a.requires_grad != b.requires_grad:
            return False
        return bool(torch.equal(a, b)) or bool(((a != a) & (b != b) | (a == b)).all())
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and same(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def clone_tree(x):
    if isinstance(x, torch.Tensor):
        c = x.detach().clone()
        if x.stride() != c.stride():
            c = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype).copy_(x)
        return c.requires_grad_(x.requires_grad)
    if isinstance(x, list):
        return [clone_tree(v) for v in x]
    if isinstance(x, tuple):
        return tuple(clone_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: clone_tree(v) for k, v in x.items()}
    return x


def check_program(fn, make_inputs, variants=(0, 0, 1)):
    """Run ``fn`` eagerly and captured (twice per shape variant), compare bit for bit.

    ``make_inputs(gen, variant)`` returns the argument tuple; the same seed feeds both runs.
    """
    opt = danlu_dynamo.optimize("eager")(fn)
    for v in variants:
        seed = fresh_seed()
        g = torch.Generator().manual_seed(seed)
        args = make_inputs(g, v)
        args_e, args_c = clone_tree(args), clone_tree(args)
        torch.manual_seed(seed)
        expected = fn(*args_e)
        torch.manual_seed(seed)
        got = opt(*args_c)
        assert same(expected, got), f"seed={seed} variant={v}\nexpected={expected}\ngot={got}"
        assert same(args_e, args_c), f"seed={seed}: inputs mutated differently"
    internal = [r for r in opt._capture_ctx.eager_reasons if "internal capture error" in r]
    assert not internal, internal
    return opt
