"""Modules whose ``forward`` is a ``staticmethod`` (or a ``classmethod``): the module is not
passed to it, as in eager (``TypeError: forward() takes 1 positional argument but 2 were
given`` before), whether the module is compiled itself or called by another one."""

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import danlu_dynamo
from danlu_dynamo import config

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import Counter, breaks, check  # noqa: E402


class Static(nn.Module):
    @staticmethod
    def forward(x, scale=2.0):
        return x.sin() * scale


class ClassFwd(nn.Module):
    factor = 3.0

    @classmethod
    def forward(cls, x):
        return x * cls.factor


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Static()
        self.c = ClassFwd()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.c(self.s(self.lin(x), scale=0.5))


@pytest.fixture(params=["bytecode", "segments"])
def capture_path(request):
    prev = config.capture_path
    config.capture_path = request.param
    try:
        yield request.param
    finally:
        config.capture_path = prev


@pytest.mark.parametrize("mod_cls", [Static, ClassFwd])
def test_compiled_module_with_static_or_class_forward(mod_cls, capture_path):
    m = mod_cls()
    counter = Counter()
    opt = danlu_dynamo.optimize(counter)(m)
    for _ in range(2):
        x = torch.randn(3, 4)
        assert torch.equal(opt(x), m(x))
    assert len(counter.graphs) == 1


def test_static_forward_of_a_submodule_is_inlined(capture_path):
    m = Outer()
    counter = Counter()
    opt = danlu_dynamo.optimize(counter)(m)
    for _ in range(2):
        x = torch.randn(2, 4)
        assert torch.allclose(opt(x), m(x))
    assert len(counter.graphs) == 1


def test_static_forward_called_from_a_function():
    s = Static()

    def f(x):
        return s(x) + Static.forward(x, 1.0) + s.forward(x)

    opt, c = check(f, lambda g: (torch.randn(3, generator=g),))
    assert len(c.graphs) == 1 and not breaks(opt)
