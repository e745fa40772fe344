"""``Tensor.type()``: the type string of the real device (the fake is a meta tensor, whose
string leaked as ``torch.meta.HalfTensor``); ``t.type(other.type())``, ``t.type(dtype)``,
``t.type("torch.LongTensor")`` and ``t.type(torch.HalfTensor)`` convert as in eager."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def test_type_string_of_inputs_and_results():
    def f(x, h, i):
        return x.type(), h.type(), i.type(), (x * 2).type(), x.half().type(), x.long().type()

    opt, c = check(f, lambda g: (_t(g, 3), _t(g, 3).half(), torch.arange(3)))
    assert not breaks(opt)


def test_type_of_other_tensor_converts():
    def f(x, other):
        y = x.type(other.type())
        return y, y.dtype, y.type()

    for make in (lambda g: _t(g, 2).half(), lambda g: torch.arange(2), lambda g: _t(g, 2)):
        opt, c = check(f, lambda g, make=make: (_t(g, 4, 2), make(g)))
        assert len(c.graphs) <= 1 and not breaks(opt)  # no graph: the same dtype, no op


@pytest.mark.parametrize(
    "target",
    [torch.float16, torch.int64, "torch.HalfTensor", "torch.LongTensor", "torch.FloatTensor"],
)
def test_type_with_dtype_or_string(target):
    def f(x):
        y = x.type(target)
        return y, y is x, y.type()

    opt, c = check(f, lambda g: (_t(g, 3) * 10,))
    assert not breaks(opt)


@pytest.mark.parametrize("cls", [torch.HalfTensor, torch.LongTensor, torch.DoubleTensor])
def test_type_with_a_tensor_type_class(cls):
    def f(x):
        y = x.type(cls) + 1
        return y, y.dtype

    opt, c = check(f, lambda g: (_t(g, 3) * 10,))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_type_with_an_invalid_string_raises_like_eager():
    def f(x):
        return x.type("torch.NoSuchTensor")

    check(f, lambda g: (_t(g, 3),))


def test_type_to_cuda_string_is_not_traced():
    def f(x):
        return x.type("torch.cuda.FloatTensor")

    opt, _ = check(f, lambda g: (_t(g, 3),), calls=1)
    assert breaks(opt)


def test_type_through_aot_eager():
    from danlu_dynamo.backends import lookup_backend  # noqa: F401 - the backend registry

    def f(x, other):
        return (x.type(other.type()) * 3).type(torch.float32).sum()

    check(f, lambda g: (_t(g, 3), torch.arange(3)))
