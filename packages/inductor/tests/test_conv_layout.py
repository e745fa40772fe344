"""The convolution layout choice (lowering/convolution.py): which graphs take it, which
values it lays out channels-last, and that results and output strides stay eager's."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import aten_graph
from torch.utils import _pytree as pytree

from danlu_inductor import compile_fx
from danlu_inductor.lowering.convolution import (
    channels_last_strides,
    nodes_preferring_channels_last,
    wants_channels_last,
)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _is_channels_last(stride, size) -> bool:
    want = channels_last_strides(size)
    return all(n == 1 or int(a) == int(b) for n, a, b in zip(size, stride, want))


def depthwise_block(x, w_in, w_dw, w_out, scale, fc):
    """A MobileNet-style block: small weights, large activations; then a classifier."""
    y = F.conv2d(x, w_in)
    y = F.hardswish(y * scale[None, :, None, None])
    y = F.conv2d(y, w_dw, padding=1, groups=w_dw.shape[0])
    y = F.conv2d(F.relu(y), w_out) + x  # a residual sum between convolutions
    return F.linear(y.mean((2, 3)), fc), y


def depthwise_args(batch=2, channels=8, size=20):
    x = torch.randn(batch, channels, size, size)
    return [
        x,
        torch.randn(4 * channels, channels, 1, 1) * 0.3,
        torch.randn(4 * channels, 1, 3, 3) * 0.3,
        torch.randn(channels, 4 * channels, 1, 1) * 0.2,
        torch.rand(4 * channels) + 0.5,
        torch.randn(10, channels),
    ]


def wide_block(x, w1, w2):
    """A ResNet-style stack at a small image size: the weights outweigh the activations."""
    return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, padding=1)


def wide_args():
    return [torch.randn(1, 64, 6, 6), torch.randn(128, 64, 3, 3), torch.randn(128, 128, 3, 3)]


@pytest.fixture
def no_setting(monkeypatch):
    monkeypatch.delenv("DANLU_CONV_CHANNELS_LAST", raising=False)


def test_which_graphs_take_it(no_setting, monkeypatch):
    small_weights = aten_graph(depthwise_block, *depthwise_args())
    big_weights = aten_graph(wide_block, *wide_args())
    mkldnn = torch.backends.mkldnn.is_available()
    assert wants_channels_last(small_weights, CPU) == mkldnn
    assert not wants_channels_last(big_weights, CPU)
    # CUDA: inference and training graphs (the decision needs no GPU); the CPU: inference
    assert wants_channels_last(big_weights, CUDA)
    small_weights.meta["saved_for_backward_from"] = 2  # a training step's forward
    assert wants_channels_last(small_weights, CUDA)
    assert not wants_channels_last(small_weights, CPU)
    no_convs = aten_graph(lambda x: x.relu() + 1, torch.randn(2, 3, 4, 4))
    assert not wants_channels_last(no_convs, CPU) and not wants_channels_last(no_convs, CUDA)
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "1")
    assert wants_channels_last(big_weights, CPU) and wants_channels_last(small_weights, CUDA)
    assert not wants_channels_last(no_convs, CPU)
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "0")
    assert not wants_channels_last(small_weights, CPU)
    assert not wants_channels_last(big_weights, CUDA)


def test_preferred_values_stop_at_the_classifier():
    gm = aten_graph(depthwise_block, *depthwise_args())
    prefer = nodes_preferring_channels_last(gm)
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert len(convs) == 3 and all(c in prefer for c in convs)
    # the values between the convolutions (scale, hardswish, relu, the residual sum) too
    feeding = [c.args[0] for c in convs if c.args[0].op != "placeholder"]
    assert len(feeding) == 2 and all(n in prefer for n in feeding)
    residual = [n for n in convs[2].users if n.target is torch.ops.aten.add.Tensor]
    assert residual and residual[0] in prefer
    # the classifier's 2-D values are not
    mm = [n for n in gm.graph.nodes if n.target in (torch.ops.aten.mm.default,)]
    assert all(n not in prefer for n in mm)


def _compile(fn, args):
    gm = aten_graph(fn, *args)
    flat = pytree.tree_leaves(list(args))
    return compile_fx(gm, flat), flat


@pytest.mark.parametrize("setting", ["", "1", "0"])
def test_results_and_strides_are_eagers(setting, monkeypatch):
    if setting:
        monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", setting)
    else:
        monkeypatch.delenv("DANLU_CONV_CHANNELS_LAST", raising=False)
    torch.manual_seed(0)
    args = depthwise_args()
    compiled, _ = _compile(depthwise_block, args)
    for _ in range(2):  # fresh inputs, a non-contiguous image among them
        fresh = depthwise_args()
        fresh[0] = torch.randn(2, 8, 24, 20)[:, :, 2:22, :]
        want = depthwise_block(*[a.double() for a in fresh])
        got = compiled(*fresh)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4)
        eager = depthwise_block(*fresh)
        assert [g.stride() for g in got] == [e.stride() for e in eager]
    # the convolutions read channels-last activations exactly when the choice is on
    convs = [
        b
        for b in compiled.graph.buffers
        if "convolution" in type(b).__name__.lower()
        or "aten.convolution" in str(getattr(b, "op", ""))
    ]
    chose = compiled.graph.conv_channels_last
    assert chose == (setting == "1" or (setting == "" and torch.backends.mkldnn.is_available()))
    if chose:
        assert convs, [type(b).__name__ for b in compiled.graph.buffers]
        for b in convs:
            assert _is_channels_last(b.layout.stride, b.layout.size), b.layout
    else:
        assert all(not _is_channels_last(b.layout.stride, b.layout.size) for b in convs)


def _bn_statistics(x, w):
    """A convolution and the per-channel statistics of its result (batch norm in training)."""
    y = F.conv2d(x, w, padding=1)
    mean = y.mean((0, 2, 3), keepdim=True)
    return mean, (y - mean).square().mean((0, 2, 3))


@pytest.mark.parametrize("channels_last", [True, False])
def test_split_statistics_read_channels_last_memory_in_order(channels_last):
    """On GPU graphs a per-channel reduction over a long extent is split in two stages; over
    a channels-last value its partials are chunk-major ([splits, C]: neighbouring programs
    read neighbouring channels), else channel-major ([C, splits])."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    args = [torch.randn(8, 16, 32, 32), torch.randn(24, 16, 3, 3)]
    gm = aten_graph(_bn_statistics, *args)
    graph = GraphLowering(gm, args, for_gpu=True, conv_channels_last=channels_last).run()
    partials = [
        b.layout.size
        for b in graph.buffers
        if isinstance(b, ComputedBuffer)
        and isinstance(b.data, Reduction)
        and len(b.layout.size) == 2
    ]
    assert partials, [b.layout.size for b in graph.buffers]
    for size in partials:
        channels_at = 1 if channels_last else 0
        assert int(size[channels_at]) == 24 and int(size[1 - channels_at]) > 1, size


def _ln_weight_grads(g, x, mean, rstd):
    """A channels-last layer norm's weight and bias gradients (ConvNeXt's blocks): per-channel
    sums over every position of ``g * xhat`` and of ``g``; mean and rstd are per position."""
    xhat = (x - mean) * rstd
    return (g * xhat).sum((0, 1, 2)), g.sum((0, 1, 2))


def test_split_sums_with_per_row_loads_are_chunk_major():
    """The per-position mean/rstd loads are the same for every channel, so they do not decide
    the order: the partials of both sums are chunk-major, like a plain per-channel sum."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    args = [torch.randn(8, 28, 28, 96), torch.randn(8, 28, 28, 96)]
    args += [torch.randn(8, 28, 28, 1), torch.rand(8, 28, 28, 1) + 0.5]
    gm = aten_graph(_ln_weight_grads, *args)
    graph = GraphLowering(gm, args, for_gpu=True).run()
    partials = [
        b.layout.size
        for b in graph.buffers
        if isinstance(b, ComputedBuffer)
        and isinstance(b.data, Reduction)
        and len(b.layout.size) == 2
    ]
    assert len(partials) == 2, [b.layout.size for b in graph.buffers]
    for size in partials:
        assert int(size[1]) == 96 and int(size[0]) > 1, size


@pytest.mark.parametrize("channels_last", [True, False])
def test_long_variance_on_gpu_graphs_is_split_into_chunk_welford_passes(channels_last):
    """Batch-norm statistics over a long extent (var_mean over N, H, W) are split on GPU
    graphs: a Welford pass over each chunk (many programs, the input read once), then the
    chunks' means and deviations combined; not one Welford pass over few programs. The values
    match eager (checked in float64 through the C++ backend, which shares the lowering but
    does not split)."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    def stats(x):
        return torch.var_mean(x, (0, 2, 3), correction=0)

    x = torch.randn(8, 24, 48, 48)  # 18432 values per channel: beyond one-kernel two-pass
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    gm = aten_graph(stats, x)
    graph = GraphLowering(gm, [x], for_gpu=True).run()
    reductions = [
        (b.data.reduction_type, [int(s) for s in b.layout.size])
        for b in graph.buffers
        if isinstance(b, ComputedBuffer) and isinstance(b.data, Reduction)
    ]
    # the chunks' Welford mean and m2 (24 channels x splits partials), the sum of the chunk
    # means, the combined m2; the mean is the chunk means' (var_mean is kept whole: no
    # separate sum of the same values)
    kinds = [t for t, _ in reductions]
    assert kinds == ["sum", "sum", "sum", "sum"], reductions
    for _, size in reductions[:2]:
        assert len(size) == 2 and 24 in size and math.prod(size) > 24, size
    xd = x.double()
    from helpers import check_same

    check_same(stats, xd, rtol=1e-10, atol=1e-10)


def _relu_grad_sum_and_scale(g, y):
    d = torch.where(y <= 0, 0.0, g)  # a ReLU's backward
    return d.sum((0, 2, 3)), d * 2.0  # a per-channel sum of it (split) and a pointwise of it


@pytest.mark.parametrize("channels_last", [True, False])
def test_pointwise_joins_a_split_reduction_only_when_its_memory_order_fits(channels_last):
    """A pointwise value over the whole tensor can run inside a split reduction's loop ("xr"),
    visiting elements in the reduction's order. Over contiguous memory that order walks the
    memory (fused); over channels-last memory a chunk-major split visits no two neighbours in
    a row, so the pointwise value gets a kernel of its own. Values match eager either way."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.symbols import size_hints
    from danlu_inductor.scheduler import Scheduler

    gen = torch.Generator().manual_seed(5)
    args = [torch.randn(8, 32, 40, 40, generator=gen) for _ in range(2)]
    if channels_last:
        args = [a.to(memory_format=torch.channels_last) for a in args]
    gm = aten_graph(_relu_grad_sum_and_scale, *args)
    graph = GraphLowering(gm, args, for_gpu=True).run()
    with size_hints(graph.hint_values()):
        groups = Scheduler(graph).groups
    placed = [p for grp in groups for p in grp.placements.values()]
    assert ("xr" in placed) == (not channels_last), [grp.describe() for grp in groups]
    from helpers import check_same

    check_same(_relu_grad_sum_and_scale, *args, rtol=1e-4, atol=1e-4)


def convnext_block(x, w_dw, ln_w, ln_b, fc1, fc2, w_next):
    """ConvNeXt's block: the depthwise convolution's output permuted to (N, H, W, C), a layer
    norm and an MLP there, permuted back, a residual sum, then the next convolution."""
    y = F.conv2d(x, w_dw, padding=3, groups=x.shape[1]).permute(0, 2, 3, 1)
    y = F.layer_norm(y, (y.shape[-1],), ln_w, ln_b, eps=1e-6)
    y = F.linear(F.gelu(F.linear(y, fc1)), fc2).permute(0, 3, 1, 2)
    return F.conv2d(x + y, w_next)


def convnext_args(c=16, size=10):
    return [
        torch.randn(2, c, size, size),
        torch.randn(c, 1, 7, 7) * 0.2,
        torch.rand(c) + 0.5,
        torch.randn(c),
        torch.randn(4 * c, c) * 0.3,
        torch.randn(c, 4 * c) * 0.2,
        torch.randn(c, c, 1, 1) * 0.3,
    ]


def test_permuted_values_keep_their_own_layout(monkeypatch):
    # the (N, H, W, C) values between the permutations are not image-shaped for the layout
    # choice: channels-last strides would put H innermost there
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "1")
    args = convnext_args()
    gm = aten_graph(convnext_block, *args)
    prefer = nodes_preferring_channels_last(gm)
    permutes = [
        n
        for n in gm.graph.nodes
        if n.target is torch.ops.aten.permute.default and len(n.args[1]) == 4
    ]
    assert len(permutes) == 2, permutes
    after = [u for u in permutes[0].users]
    assert after and all(u not in prefer for u in after)
    compiled, flat = _compile(convnext_block, args)
    torch.testing.assert_close(compiled(*flat), convnext_block(*args), rtol=1e-4, atol=1e-4)
    assert compiled.graph.conv_channels_last
    stored_nhwc = [
        b
        for b in compiled.graph.buffers
        if type(b).__name__ == "ComputedBuffer" and list(b.layout.size) == [2, 10, 10, 16]
    ]
    assert stored_nhwc, [(type(b).__name__, b.layout.size) for b in compiled.graph.buffers]
    for b in stored_nhwc:
        assert int(b.layout.stride[-1]) == 1, (b.get_name(), b.layout.stride)


def layer_norm_2d_stem(x, w, ln_w, ln_b, w_next):
    """ConvNeXt's stem: a patchify convolution, then a layer norm over the channels written
    out by hand through (N, H, W, C) (timm's ``LayerNorm2d``); its normalized value is the
    second output, which a training step's forward saves for the backward."""
    y = F.conv2d(x, w, stride=2).permute(0, 2, 3, 1)
    mean = y.mean(-1, keepdim=True)
    normed = (y - mean) * torch.rsqrt((y - mean).pow(2).mean(-1, keepdim=True) + 1e-6)
    out = (normed * ln_w + ln_b).permute(0, 3, 1, 2)
    return F.conv2d(out, w_next), normed


def stem_args(c=16):
    return [
        torch.randn(2, 3, 20, 20),
        torch.randn(c, 3, 2, 2) * 0.3,
        torch.rand(c) + 0.5,
        torch.randn(c),
        torch.randn(c, c, 1, 1) * 0.3,
    ]


def test_values_after_a_permutation_follow_the_channels_last_memory(monkeypatch):
    """Eager's strides for the normalized (N, H, W, C) value are NCHW's, permuted (the
    convolution wrote NCHW there); here the convolution writes channels-last, so the same
    value is contiguous in memory order, and a value saved for the backward is stored so
    (written and read along the channels, not across them)."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.lowering.convolution import memory_orders

    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "1")
    args = stem_args()
    gm = aten_graph(layer_norm_2d_stem, *args)
    orders = memory_orders(gm, nodes_preferring_channels_last(gm))
    normed = list(gm.graph.nodes)[-1].args[0][1]
    assert normed in orders
    assert orders[normed] == [1600, 160, 16, 1], orders[normed]  # (2, 10, 10, 16) contiguous
    assert normed.meta["val"].stride() != (1600, 160, 16, 1)  # eager's says otherwise

    compiled, flat = _compile(layer_norm_2d_stem, args)  # the values: eager's
    for got, want in zip(compiled(*flat), layer_norm_2d_stem(*[a.double() for a in args])):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)

    gm.meta["saved_for_backward_from"] = 1  # the normalized value goes to a backward
    graph = GraphLowering(gm, args, for_gpu=True, conv_channels_last=True).run()
    saved = graph.graph_outputs[1]
    stride = [int(s) for s in saved.layout.stride]
    assert stride == [1600, 160, 16, 1], (saved.get_name(), stride)


def test_a_flat_index_member_joins_no_kernel_whose_stores_run_along_another_dim():
    """A pointwise kernel over channels-last (N, C, H, W) values stores along the channels; a
    member of the same size whose (N, H, W, C) loop is matched to the kernel by flat index
    stores along the width there. Fused, one of the two writes a GPU lane per memory
    segment, so on GPU graphs they stay apart (the CPU's vector loops take them together)."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.scheduler.scheduler import Scheduler

    def fn(x, w, w2, y, s):
        b = (F.conv2d(x, w) * s[None, :, None, None]).relu()  # stored channels-last
        return F.conv2d(b, w2), y * s + 1  # the second: (N, H, W, C), contiguous

    args = [
        torch.randn(2, 8, 6, 6),
        torch.randn(16, 8, 1, 1),
        torch.randn(16, 16, 1, 1),
        torch.randn(2, 6, 6, 16),
        torch.rand(16),
    ]
    for for_gpu in (True, False):
        graph = GraphLowering(
            aten_graph(fn, *args), args, for_gpu=for_gpu, conv_channels_last=True
        ).run()
        scheduler = Scheduler(graph)
        sizes = [len(g.nodes) for g in scheduler.groups if not g.is_extern]
        assert max(sizes) == (1 if for_gpu else 2), scheduler.describe()


@pytest.mark.parametrize("for_gpu", [True, False])
def test_gpu_convolution_bias_is_added_by_the_kernel_that_reads_the_result(for_gpu):
    """On GPU graphs the library convolution runs without its bias (cuDNN would add it in a
    kernel of its own) and the bias is added inside the generated kernel of the next op (here
    the ReLU): no buffer holds the convolution's result plus bias alone. CPU graphs keep the
    bias in the convolution (oneDNN adds it for free). Values: the Triton path's wrapper case
    ``conv_bias_relu`` checks them against float64 eager."""
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, ExternKernel

    def fn(x, w, b):
        return F.conv2d(x, w, b, padding=1).relu()

    args = [torch.randn(2, 8, 12, 12), torch.randn(16, 8, 3, 3), torch.randn(16)]
    graph = GraphLowering(aten_graph(fn, *args), args, for_gpu=for_gpu).run()
    convs = [b for b in graph.buffers if isinstance(b, ExternKernel)]
    assert len(convs) == 1, [type(b).__name__ for b in graph.buffers]
    bias = convs[0].args[2]
    assert (bias is None) == for_gpu, convs[0].args
    computed = [b for b in graph.buffers if isinstance(b, ComputedBuffer)]
    assert len(computed) == 1, [b.get_name() for b in computed]  # the ReLU, bias inside


def _partial_buffers(fn, *args):
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.ir.nodes import ComputedBuffer, Reduction

    graph = GraphLowering(aten_graph(fn, *args), list(args), for_gpu=True).run()
    return [
        [int(s) for s in b.layout.size]
        for b in graph.buffers
        if isinstance(b, ComputedBuffer) and isinstance(b.data, Reduction)
    ]


def test_row_reductions_with_many_rows_are_not_split():
    """A layer norm or a log-softmax over long rows of a tall matrix already has a program
    per row: one stage. A column sum of the same shape (few outputs) is still split."""
    x = torch.randn(2048, 4096)
    rows = _partial_buffers(lambda t: F.layer_norm(t, (4096,)), x)
    assert rows and all(s in ([2048], [2048, 1]) for s in rows), rows
    rows = _partial_buffers(lambda t: torch.log_softmax(t, -1), x)
    assert rows and all(s in ([2048], [2048, 1]) for s in rows), rows
    cols = _partial_buffers(lambda t: t.sum(0), torch.randn(8192, 768))
    assert any(len(s) == 2 and 768 in s and max(s) > 1 and min(s) > 1 for s in cols), cols
    few = _partial_buffers(lambda t: torch.log_softmax(t, -1), torch.randn(256, 32768))
    assert len(few) > 2, few  # 256 rows: split, as before
