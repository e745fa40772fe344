"""``torch.autocast`` inside (and around) the compiled function: the traced example values
carry autocast's dtypes, so the program reads eager's ``y.dtype`` inside and after the block,
and the outputs have eager's dtypes (a matmul under bfloat16 autocast is bfloat16)."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402

BF16 = torch.bfloat16


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def _xw(g):
    return _t(g, 4, 8), _t(g, 8, 5)


def test_matmul_dtype_inside_and_after_the_block():
    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            y = x @ w
            inside = y.dtype
            z = y.relu() + 1  # not an autocast op: keeps bf16
            s = torch.softmax(y, -1)
        after = y + 1.0  # bf16 + python float: bf16
        mixed = y + x[:, :5]  # bf16 + fp32 outside autocast: fp32
        return y, z, s, inside, after, mixed, after.dtype, mixed.dtype

    opt, c = check(f, _xw)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_branch_on_the_dtype():
    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            y = torch.mm(x, w)
            if y.dtype == torch.bfloat16:
                y = y * 2
            else:
                y = y - 100
        return y.float()

    opt, c = check(f, _xw)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_linear_module_and_functional():
    lin = nn.Linear(8, 6)

    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            a = lin(x)
            b = F.linear(x, w.t(), None)
            c = torch.addmm(torch.zeros(4, 5), x, w)
            d = torch.cat([a[:, :5], x[:, :5]])  # promote: widest dtype
        return a, b, c, d, a.dtype, d.dtype

    opt, c = check(f, _xw)
    assert not breaks(opt)


def test_nested_disable_and_reenable():
    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            a = x @ w
            with torch.autocast("cpu", enabled=False):
                b = x @ w
                with torch.autocast("cpu", dtype=BF16):
                    c = x @ w
            d = x @ w
        e = x @ w
        return [t.dtype for t in (a, b, c, d, e)], a, b, c, d, e

    opt, c = check(f, _xw)
    assert len(c.graphs) == 1 and not breaks(opt)


@torch.autocast("cpu", dtype=BF16)
def _mm_autocast(x, w):
    return x @ w


def test_autocast_as_a_decorator():
    def f(x, w):
        y = _mm_autocast(x, w)
        return y, y.dtype, (y + x[:, :5]).dtype

    opt, c = check(f, _xw)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_autocast_entered_around_the_compiled_call():
    import danlu_dynamo

    def f(x, w):
        y = x @ w
        return y, y.dtype, (y * 2).sum(-1)

    opt = danlu_dynamo.optimize("eager")(f)
    g = torch.Generator().manual_seed(0)
    x, w = _xw(g)
    for dtype in (BF16, torch.float16, None):
        if dtype is None:
            e, c = f(x, w), opt(x, w)
        else:
            with torch.autocast("cpu", dtype=dtype):
                e, c = f(x, w), opt(x, w)
        assert e[1] == c[1] and e[0].dtype == c[0].dtype and torch.equal(e[0], c[0])
        assert torch.equal(e[2], c[2])


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
def test_autocast_dtype_argument(dtype):
    def f(x, w):
        with torch.autocast(device_type="cpu", dtype=dtype):
            y = x @ w
        return y, y.dtype

    check(f, _xw)


def test_op_that_type_checks_only_after_autocast_casts():
    # a bfloat16 activation into a convolution whose weight and bias are float32 (timm's
    # ConvNeXt: the stem's convolution, then a channels-last layer norm, then a depthwise
    # convolution): eager autocast casts all three to bfloat16; the uncast fakes would raise,
    # which used to end the graph there
    conv = nn.Conv2d(6, 6, 3, padding=1, groups=6)

    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            y = F.conv2d(x, w)  # bfloat16
            y = F.layer_norm(y.permute(0, 2, 3, 1), (6,)).permute(0, 3, 1, 2).to(BF16)
            z = conv(y)
        return z, z.dtype

    def inputs(g):
        return _t(g, 2, 4, 9, 9), _t(g, 6, 4, 1, 1)

    opt, c = check(f, inputs)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_op_that_fails_under_autocast_too_still_breaks_the_graph():
    def f(x, w):
        with torch.autocast("cpu", dtype=BF16):
            return F.conv2d(x, w)  # channel mismatch: eager raises as well

    g = torch.Generator().manual_seed(0)
    x, w = _t(g, 2, 4, 9, 9), _t(g, 6, 5, 1, 1)
    import danlu_dynamo

    opt = danlu_dynamo.optimize("eager")(f)
    with pytest.raises(RuntimeError):
        f(x, w)
    with pytest.raises(RuntimeError):
        opt(x, w)


def _cuda_autocast(enabled: bool):
    # the CUDA autocast state can be switched on without a GPU: the probe never computes
    torch._C.set_autocast_enabled("cuda", enabled)
    torch._C.set_autocast_dtype("cuda", torch.bfloat16)


def test_probe_of_an_op_that_makes_tensors_inside():
    # attention's math path and other composites make tensors (a causal mask) with the
    # probe's device: they are probes too, not real tensors mixed with meta ones
    from danlu_dynamo.capture.autocast_probe import _Probe, probe_dtypes

    def composite(x):
        return x + torch.ones(x.shape, dtype=torch.bool, device=x.device).tril().to(x.dtype)

    def probe(*shape, dt=torch.float32, device="cpu"):
        return _Probe(torch.empty(*shape, dtype=dt, device="meta"), torch.device(device))

    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert probe_dtypes(composite, (probe(4, 4),), {}) == [torch.float32]
    bf16 = [probe(2, 4, 32, 16, dt=torch.bfloat16, device="cuda") for _ in range(3)]
    _cuda_autocast(True)
    try:
        for kw in ({"is_causal": True}, {"attn_mask": probe(2, 1, 32, 32, dt=torch.bool)}):
            got = probe_dtypes(F.scaled_dot_product_attention, bf16, kw)
            assert got == [torch.bfloat16], kw
        lin = probe_dtypes(F.linear, (probe(4, 16, device="cuda"), probe(8, 16, device="cuda")), {})
        assert lin == [torch.bfloat16]
    finally:
        _cuda_autocast(False)
