"""Ops that take a Python int argument which automatic dynamic made symbolic, through the
whole stack (capture, aotautograd with inductor's decompositions, C++ kernels): each call
must equal eager for every value, whether the int stays symbolic or a trace specialises it."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import danlu

CASES = {
    "zeros": lambda x, n: x.sum() + torch.zeros(n, 3).sum(0),
    "arange": lambda x, n: x[:n] * torch.arange(n).unsqueeze(1),
    "repeat": lambda x, n: x.repeat(n, 1),
    "narrow": lambda x, n: x.narrow(0, 0, n) + 1,
    "split": lambda x, n: x.split(n)[0] * 2,
    "pad": lambda x, n: F.pad(x, (0, n)) * 2,
    "roll": lambda x, n: x.roll(n, 0) * 2,  # the trace specialises the shift: guarded
    "topk": lambda x, n: x.flatten().topk(n).values * 2,
    "view": lambda x, n: x.reshape(n, -1).softmax(-1),
    "floordiv_mod": lambda x, n: x * (n // 2) + n % 3,
    "sqrt": lambda x, n: x * (n**0.5),  # not expressible as graph nodes: per-value fallback
    "negative_index": lambda x, n: x[-n] * 2,
    "triangle": lambda x, n: torch.ones(n, n).tril() @ x[:n],
    "masked_fill": lambda x, n: x.masked_fill(torch.arange(x.shape[0])[:, None] >= n, 0.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_int_op_matches_eager_for_every_value(name):
    fn = CASES[name]
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(4, 12, generator=gen).t()  # 12 x 4, non-contiguous
    compiled = danlu.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sqrt case says it falls back per value
        for n in (2, 3, 4, 6, 3, 8):
            torch.testing.assert_close(compiled(x, n), fn(x, n))
