"""The wrapper's views and allocations (runtime.py's ``view`` and ``empty``, C++ in
``_buffers`` where built): the same tensors as torch's calls, torch's errors, and torch's own
path for what C++ does not read plainly."""

from __future__ import annotations

import pytest
import torch

from danlu_inductor import runtime

_buffers = pytest.importorskip("danlu_inductor._buffers")


def test_the_wrappers_use_the_cpp_helpers_where_built_for_this_torch():
    assert _buffers.TORCH_VERSION == torch.__version__
    assert runtime.view is _buffers.view and runtime.empty is _buffers.empty


def _reference(t, size, stride, offset):
    return torch.as_strided(t, size, stride, t.storage_offset() + offset)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_view_is_torch_as_strided_from_the_tensors_first_element(dtype):
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(7, 9, 11, generator=gen) * 10).to(dtype)
    cases = [
        (base, (63, 11), (11, 1), 0),  # flattened
        (base, (11, 63), (1, 11), 0),  # transposed
        (base[2:], (3, 5), (11, 2), 4),  # a view that starts further in, plus an offset
        (base[:, 1:, ::2], (6, 4), (1, 22), 3),  # of a non-contiguous tensor
        (base, (0, 5), (5, 1), 0),  # empty
        (base[6, 8], (), (), 10),  # a scalar, the storage's last element
    ]
    for t, size, stride, offset in cases:
        got = runtime.view(t, size, stride, offset)
        want = _reference(t, size, stride, offset)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert got.storage_offset() == want.storage_offset()
        assert got.data_ptr() == want.data_ptr() and got.dtype == dtype
        assert torch.equal(got, want)


def test_view_shares_memory_both_ways_and_has_no_autograd_history():
    w = torch.randn(4, 6, requires_grad=True)
    v = runtime.view(w, (6, 4), (1, 6), 0)
    assert not v.requires_grad and v.grad_fn is None
    with torch.no_grad():
        w[1, 2] = 5.0
    assert v[2, 1].item() == 5.0
    b = torch.zeros(10)
    runtime.view(b, (3,), (2,), 1).fill_(1.0)
    assert b.tolist() == [0, 1, 0, 1, 0, 1, 0, 0, 0, 0]


def test_view_past_the_storage_raises_torchs_error():
    t = torch.zeros(4, 4)
    with pytest.raises(RuntimeError, match="out of bounds"):
        runtime.view(t, (5, 4), (4, 1), 0)
    with pytest.raises(RuntimeError, match="out of bounds"):
        runtime.view(t[1:], (4, 4), (4, 1), 0)  # fits from the storage's start, not from t's


def test_view_of_a_tensor_subclass_goes_through_torch():
    seen = []

    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    t = torch.arange(12.0).as_subclass(Logged)
    v = runtime.view(t, (3, 4), (4, 1), 0)
    assert type(v) is Logged and "as_strided" in seen
    assert torch.equal(v.as_subclass(torch.Tensor), torch.arange(12.0).view(3, 4))


def test_view_under_a_torch_function_mode_goes_through_torch():
    from torch.overrides import TorchFunctionMode

    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Mode():
        v = runtime.view(torch.arange(6.0), (2, 3), (3, 1), 0)
    assert "as_strided" in seen and v.shape == (2, 3)


def test_view_of_arguments_it_does_not_read_goes_through_torch():
    t = torch.arange(6.0)
    assert runtime.view(t, [2, 3], [3, 1], 0).shape == (2, 3)  # lists, not tuples
    with pytest.raises(RuntimeError):
        runtime.view(t, (2, 3), (-3, 1), 0)  # torch's own error for a negative stride


def test_empty_is_torch_empty_strided():
    for size, stride, dtype in [
        ((3, 4), (4, 1), torch.float32),
        ((3, 4), (1, 3), torch.bfloat16),
        ((2, 3, 5), (15, 1, 3), torch.int32),
        ((0, 5), (5, 1), torch.float16),
        ((), (), torch.float64),
    ]:
        t = runtime.empty(size, stride, dtype, torch.device("cpu"))
        assert t.shape == size and t.stride() == stride and t.dtype == dtype
        assert t.device.type == "cpu" and not t.requires_grad and t.storage_offset() == 0
    # arguments it does not read (lists, a device given as a string) go through torch
    t = runtime.empty([2, 2], [2, 1], torch.float32, "cpu")
    assert t.shape == (2, 2)
    with pytest.raises(RuntimeError):
        runtime.empty((2, 2), (2, 1, 1), torch.float32, torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_view_and_empty_on_cuda():
    dev = torch.device("cuda", torch.cuda.current_device())
    base = torch.randn(6, 10, device=dev).to(torch.bfloat16)[1:]
    got = runtime.view(base, (8, 5), (1, 10), 2)  # the last element read: 10 + 2 + 7 + 40
    want = _reference(base, (8, 5), (1, 10), 2)
    assert got.device == dev and got.data_ptr() == want.data_ptr() and torch.equal(got, want)
    t = runtime.empty((4, 3), (1, 4), torch.float16, dev)
    assert t.device == dev and t.stride() == (1, 4) and t.dtype == torch.float16
    with pytest.raises(RuntimeError, match="out of bounds"):
        runtime.view(base, (60,), (1,), 0)
