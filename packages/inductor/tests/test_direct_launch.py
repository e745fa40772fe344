"""The bound direct launch (``DirectLaunch.bind``) without a GPU: a stand-in for Triton's
compiled-kernel launcher records what it is called with. On a GPU, ``triton_wrapper_cases``'
``direct_launch`` case runs the real one across alignments."""

from __future__ import annotations

import torch

from danlu_inductor.codegen.triton.backend import DirectLaunch


class _Kernel:
    function, packed_metadata = "function", "packed"

    def __init__(self):
        self.calls = []

    def run(self, *a):
        self.calls.append(a)


def _direct(kernel, checks):
    return DirectLaunch(kernel, (64, 8), checks, (lambda device: f"stream{device}", 0))


def test_bound_launch_passes_grid_stream_arguments_sizes_and_constants():
    k = _Kernel()
    x = torch.zeros(64)  # data pointers of fresh tensors are 16-byte aligned
    slow = []
    go = _direct(k, ((0,), (), (1,))).bind((5,), (320,), 1, lambda *a: slow.append(a))
    go(x)
    assert k.calls == [(5, 1, 1, "stream0", "function", "packed", None, None, None, x, 320, 64, 8)]
    assert not slow


def test_an_argument_that_breaks_an_assumption_takes_the_slow_path():
    k = _Kernel()
    base = torch.zeros(65)
    slow = []
    go = _direct(k, ((0,), (1,), ())).bind((2, 3), (), 2, lambda *a: slow.append(a))
    go(base[:64], 1)
    assert len(k.calls) == 1 and k.calls[0][:3] == (2, 3, 1)
    go(base[1:], 1)  # 4 bytes off: no longer 16-byte aligned
    go(base[:64], 2)  # was 1 when compiled
    assert len(k.calls) == 1 and len(slow) == 2


def test_static_sizes_that_break_an_assumption_give_no_bound_launch():
    # a size that was a multiple of 16 when compiled but is not now: never bound
    assert _direct(_Kernel(), ((), (), (1,))).bind((1,), (33,), 1, None) is None
    assert _direct(_Kernel(), ((), (1,), ())).bind((1,), (2,), 1, None) is None
