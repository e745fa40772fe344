"""The CUDA graph replay's address check read from the tensors (``_replay_checks``) answers
what torch's ``data_ptr()`` answers, or None where it does not read a tensor itself."""

import os

import pytest
import torch

from danlu_inductor import cudagraphs

same = cudagraphs._same_addresses
needs_it = pytest.mark.skipif(same is None, reason="_replay_checks is not built for this torch")


def _ptrs(args, order):
    return tuple(args[i].data_ptr() for i in order)


def _inputs():
    base = torch.randn(6, 8)
    return (
        base,
        torch.nn.Parameter(torch.randn(3)),
        base[2:, 1:],  # a view at an offset: its own data pointer
        base.t(),
        torch.empty(0),
        torch.randn(4, 4)[:, ::2],
        7,  # not read: not in the order
    )


@needs_it
def test_agrees_with_data_ptr():
    args = _inputs()
    order = tuple(range(6))
    assert same(args, order, _ptrs(args, order)) is True
    for k in range(6):
        wrong = list(_ptrs(args, order))
        wrong[k] += 4
        assert same(args, order, tuple(wrong)) is False, k
    assert same(args, (), ()) is True


@needs_it
def test_a_parameter_moved_in_place_is_seen():
    p = torch.nn.Parameter(torch.randn(5))
    args = (torch.randn(2), p)
    want = _ptrs(args, (1,))
    assert same(args, (1,), want) is True
    p.data = torch.randn(5)
    assert p.data_ptr() != want[0]
    assert same(args, (1,), want) is False


class _Sub(torch.Tensor):
    pass


class _Mode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@needs_it
def test_what_it_does_not_read_is_none():
    t = torch.randn(3)
    sub = torch.randn(3).as_subclass(_Sub)  # its data_ptr() goes through __torch_function__
    assert same((t, sub), (0, 1), _ptrs((t, sub), (0, 1))) is None
    with _Mode():
        assert same((t,), (0,), (t.data_ptr(),)) is None
    assert same((t, "x"), (1,), (0,)) is None


@needs_it
def test_bad_arguments_raise():
    t = torch.randn(3)
    with pytest.raises(TypeError):
        same([t], (0,), (t.data_ptr(),))  # args must be the call's tuple
    with pytest.raises(TypeError):
        same((t,), (0, 0), (t.data_ptr(),))
    with pytest.raises(IndexError):
        same((t,), (1,), (t.data_ptr(),))


def test_built_where_expected():
    """Where the build had torch (the noxfile's installs), the C++ check must be there."""
    if os.environ.get("DANLU_EXPECT_TENSOR_CHECKS") != "1":
        pytest.skip("DANLU_EXPECT_TENSOR_CHECKS is not set")
    assert same is not None


def test_static_ok_without_the_extension(monkeypatch):
    """The runner's check answers the same through data_ptr() alone."""
    runner = cudagraphs.CudaGraphRunner.__new__(cudagraphs.CudaGraphRunner)
    args = _inputs()
    runner.static_order = (0, 1, 3)
    runner.static_ptrs = _ptrs(args, runner.static_order)
    runner.layout_checked = []
    for impl in (same, None):
        monkeypatch.setattr(cudagraphs, "_same_addresses", impl)
        assert runner._static_ok(args)
        moved = (args[0], torch.nn.Parameter(torch.randn(3)), *args[2:])
        assert not runner._static_ok(moved)
