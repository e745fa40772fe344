"""Fake convolutions describe the strides eager's kernels give (channels-last in, channels-last
out), not the always-contiguous strides of ATen's meta kernel."""

import pytest
import torch
import torch.nn.functional as F

from danlu_primtorch import FakeTensorMode

CL = torch.channels_last
CL3 = torch.channels_last_3d

CASES = [
    # (input shape, input format, weight shape, weight format, groups, dtype)
    ((2, 4, 9, 8), CL, (6, 4, 3, 3), None, 1, torch.float32),
    ((2, 4, 9, 8), None, (6, 4, 3, 3), CL, 1, torch.float32),
    ((2, 4, 9, 8), None, (6, 4, 3, 3), None, 1, torch.float32),
    ((2, 8, 7, 7), CL, (8, 1, 3, 3), None, 8, torch.float32),  # depthwise
    ((2, 4, 9, 8), CL, (6, 2, 3, 3), None, 2, torch.float64),
    ((2, 4, 9, 8), CL, (6, 4, 1, 1), None, 1, torch.bfloat16),
    ((1, 3, 5, 6, 7), CL3, (4, 3, 3, 3, 3), None, 1, torch.float32),
    ((2, 1, 9, 8), CL, (6, 1, 3, 3), None, 1, torch.float32),  # ambiguous: one channel
    ((2, 3, 10), None, (5, 3, 3), None, 1, torch.float32),  # 1-D
]


def _make(shape, fmt, dtype, fake_mode=None):
    t = torch.randn(shape, dtype=dtype) if fake_mode is None else torch.empty(shape, dtype=dtype)
    return t.contiguous(memory_format=fmt) if fmt is not None else t


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fake_convolution_strides_match_eager_cpu(case):
    xs, xf, ws, wf, groups, dtype = CASES[case]
    torch.manual_seed(case)
    x, w = _make(xs, xf, dtype), _make(ws, wf, dtype)
    pad = [1] * (x.dim() - 2)
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
    ref = conv(x, w, padding=pad, groups=groups)
    with FakeTensorMode() as mode:
        fx, fw = mode.from_real(x), mode.from_real(w)
        out = conv(fx, fw, padding=pad, groups=groups)
    assert out.shape == ref.shape
    assert out.stride() == ref.stride(), (out.stride(), ref.stride())
