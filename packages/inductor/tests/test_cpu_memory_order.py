"""C++ pointwise kernels walk their dims in the memory order of what they store: on a
channels-last value (what a convolution on a channels-last input returns), the loop runs
through consecutive addresses instead of jumping by the channel count."""

from __future__ import annotations

import re

import torch
from helpers import check_same


def _gelu_scale(x):
    return torch.nn.functional.gelu(x) * 1.5


def test_channels_last_pointwise_is_one_contiguous_loop():
    x = torch.randn(2, 16, 9, 7).to(memory_format=torch.channels_last)
    compiled = check_same(_gelu_scale, x)
    out = compiled(x)
    assert out.is_contiguous(memory_format=torch.channels_last)  # eager's layout
    src = compiled.kernel_source
    # one flat loop over every element, read and written at the loop index
    assert re.search(r"for \(int64_t (x\d+) = 0; \1 < 2016; \1\+\+\)", src), src
    assert "in_ptr0[x0]" in src and re.search(r"out_ptr\d+\[x0\]", src), src


def test_transposing_pointwise_still_correct():
    # the store is contiguous, the load is channels-last: the loop follows the store
    def f(x):
        return (x * 2).contiguous()

    x = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)
    compiled = check_same(f, x)
    assert compiled(x).is_contiguous()
