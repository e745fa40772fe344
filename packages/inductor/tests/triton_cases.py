"""Graphs compiled with the Triton backend, run in a child process by test_triton_codegen.

``python triton_cases.py interpret OUT.json`` runs every case under the Triton interpreter
(TRITON_INTERPRET=1 must be set by the caller, before triton is imported) and compares with
eager on float64 inputs; ``python triton_cases.py aot OUT.json`` compiles every generated
kernel ahead of time for sm_90 (no GPU needed). Each case records its result in OUT.json.
DANLU_CASES (comma-separated parts of names) runs a subset.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))

from child_runs import record_cases  # noqa: E402

torch.manual_seed(0)


def _nan_rows(shape):
    x = torch.randn(*shape)
    x[1, 3] = float("nan")
    return x


def _inf_rows(shape):
    """Rows a softmax must get right: all -inf (NaN, as eager), -inf over the first half (lanes
    that see only -inf for a while), one +inf (NaN), one NaN, and a max in the last block
    (the running sums rescaled)."""
    x = torch.randn(*shape)
    x[0] = float("-inf")
    x[1, : shape[1] // 2] = float("-inf")
    x[2, 5] = float("inf")
    x[3, 7] = float("nan")
    x[4, -1] = 30.0
    return x


def _ties(shape):
    return torch.randint(0, 4, shape).float()


def _gelu_chain(x):
    return F.gelu(x * 2 + 1) * torch.sigmoid(x) - x.tanh()


def _nll_grad(target, scale, total, classes):
    """nll_loss's gradient as its decomposition writes it: per-row loads, ~30 cheap ops."""
    t = target[:, None]
    ignore = t == -100
    hit = (torch.arange(classes, device=t.device)[None, :] == torch.where(ignore, 0, t)) & (
        t != -100
    )
    weight = torch.where(t != -100, 1.0, 0.0)
    return torch.where(hit, -(weight * (scale / total)), 0.0)


def _max_pool_backward_inputs():
    x = torch.randn(2, 5, 15, 12).relu().to(memory_format=torch.channels_last)
    out, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    return [torch.randn_like(out), x, idx]


def _rms_norm_backward(g, h, w):
    """An RMS norm's backward written out: the input's gradient reduces each row, the
    weight's gradient sums down the columns (the column sum's partials join the row kernel)."""
    r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    xhat = h * r
    gy = g * w
    gh = gy * r - xhat * r * (gy * xhat).mean(-1, keepdim=True)
    return gh, (g * xhat).sum(0)


def _layer_norm_backward(g, x, w):
    """A layer norm's backward over [batch, positions, width]: weight and bias gradients sum
    over the first two dims."""
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    xhat = (x - mean) * rstd
    gy = g * w
    gx = rstd * (gy - gy.mean(-1, keepdim=True) - xhat * (gy * xhat).mean(-1, keepdim=True))
    return gx, (g * xhat).sum([0, 1]), g.sum([0, 1])


def _log_softmax_grad(logp, g):
    return g - logp.exp() * g.sum(-1, keepdim=True)


CASES = {
    # name: (fn, input builder, expected kernel kinds (subset), tolerance dtype override)
    # max pooling with indices stays a generated kernel on GPU graphs (ATen's on the CPU);
    # zeros after the ReLU make ties: the first maximum's index, like eager
    "max_pool_indices": (
        lambda x: F.max_pool2d(torch.relu(x), 3, 2, 1, return_indices=True),
        lambda: [torch.randn(2, 3, 15, 12)],
        {"pointwise"},
    ),
    # its backward gathers, per input position, the gradients of the windows it can lie in:
    # one pointwise kernel, no scatter (channels-last gradient, ties from the ReLU)
    "max_pool_backward_gather": (
        lambda g, x, i: torch.ops.aten.max_pool2d_with_indices_backward(
            g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i
        ),
        _max_pool_backward_inputs,
        {"pointwise"},
    ),
    "pointwise_chain": (_gelu_chain, lambda: [torch.randn(128, 65)], {"pointwise"}),
    "broadcast": (
        lambda x, y, z: (x + y) * z - y.exp(),
        lambda: [torch.randn(33, 17), torch.randn(17), torch.randn(33, 1)],
        {"pointwise"},
    ),
    "transpose_strided": (
        lambda x, y: x.t() * 2 + y,
        lambda: [torch.randn(40, 24), torch.randn(24, 40)],
        {"pointwise_2d"},
    ),
    "transpose_tiled_ragged": (
        lambda x: (x.t() * 3).contiguous() + x.t().exp(),
        lambda: [torch.randn(200, 77)],
        {"pointwise_2d"},
    ),
    "permute3d_tiled": (
        lambda x: x.permute(2, 0, 1).contiguous().relu(),
        lambda: [torch.randn(20, 18, 33)],
        {"pointwise_2d"},
    ),
    "permuted_input": (
        lambda x: (x.sin() + 1).permute(2, 0, 1).contiguous(),
        lambda: [torch.randn(5, 3, 7).permute(1, 2, 0)],
        {"pointwise"},
    ),
    # channels-last values: stores follow memory order, intermediates keep eager's strides
    "channels_last_pointwise": (
        lambda x, y: (x * 2 + y).relu(),
        lambda: [
            torch.randn(3, 5, 6, 7).to(memory_format=torch.channels_last),
            torch.randn(5, 1, 1),
        ],
        {"pointwise"},
    ),
    "conv_after_channels_last_pointwise": (
        lambda x, w: F.conv2d((x * 2).relu(), w, padding=1),
        lambda: [
            torch.randn(2, 4, 9, 8).to(memory_format=torch.channels_last),
            torch.randn(6, 4, 3, 3),
        ],
        {"pointwise"},
    ),
    # batch-norm statistics of a channels-last activation: per channel over (N, H, W), the
    # channel contiguous; ragged sizes so the outer blocks have partial rows and columns
    "channels_last_batch_stats": (
        lambda x: (x.mean([0, 2, 3]), (x * x).sum([0, 2, 3]), x.var([0, 2, 3])),
        lambda: [torch.randn(4, 37, 9, 11).to(memory_format=torch.channels_last)],
        {"outer_reduction"},
    ),
    # few outputs, long reduced extent: two-stage (split) reductions
    "split_sum_outer": (
        lambda x: (x * 2).sum(0),
        lambda: [torch.randn(4096, 96)],
        {"outer_reduction"},
    ),
    # batch-norm statistics of a split reduction: each chunk's sum and squared deviations from
    # its own mean in one kernel, the chunks combined in a second (x read once); values far
    # from zero, where E[x^2] - E[x]^2 would lose the variance
    "batch_norm_training_split_stats": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: [torch.randn(8, 64, 28, 28) * 0.5 + 30, torch.randn(64), torch.randn(64)],
        {"persistent_reduction", "pointwise"},
    ),
    # the same over a channels-last input: the chunks' partials laid out chunk-major
    "batch_norm_training_split_stats_channels_last": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: [
            (torch.randn(8, 64, 28, 28) * 0.5 - 20).to(memory_format=torch.channels_last),
            torch.randn(64),
            torch.randn(64),
        ],
        {"outer_reduction", "pointwise"},
    ),
    # a last stage's shape (ResNet-50's 64 x 7 x 7 values per channel): an extent under 4096
    # split all the same, since its few channels alone would leave most programs idle
    "batch_norm_training_short_extent_channels_last": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: [
            (torch.randn(64, 48, 7, 7) * 0.5 + 10).to(memory_format=torch.channels_last),
            torch.randn(48),
            torch.randn(48),
        ],
        {"outer_reduction", "pointwise"},
    ),
    "split_var_mean_offset": (
        lambda x: (*torch.var_mean(x, [0, 2, 3], correction=1), x.sum([0, 2, 3])),
        lambda: [torch.randn(16, 32, 16, 16) * 1e-2 + 1000],
        {"persistent_reduction"},
    ),
    # split statistics sum values shifted by each chunk's first one: far outliers (100
    # standard deviations) where chunks start, beside a large mean
    "split_var_mean_outliers": (
        lambda x: torch.var_mean(x, [0, 2, 3], correction=0),
        lambda: [_with_outliers(torch.randn(16, 32, 56, 56) * 0.5 + 30)],
        {"persistent_reduction"},
    ),
    # a sum over a one-hot row (the cross-entropy gradient's) is the selected value: no
    # reduction; targets outside the row or ignored select nothing
    "one_hot_row_sum": (
        lambda g, t, w: (
            torch.where(
                (torch.arange(g.shape[1], device=g.device).view(1, -1) == t.unsqueeze(1))
                & (t != -1).unsqueeze(1),
                w.unsqueeze(1),
                0.0,
            ).sum(1, keepdim=True)
            * g
        ),
        lambda: [
            torch.randn(64, 300),
            torch.tensor([3, -1, 299, 300, -5] * 12 + [0] * 4),
            torch.randn(64),
        ],
        {"pointwise"},
    ),
    # reductions over at most 8 values are pointwise combinations of that many loads (a
    # grouped-query attention's key gradient sums 4 heads), here from a transposed input
    "short_reductions_unrolled": (
        lambda x: (x.transpose(1, 3).sum(3), x.amax(-1), x.prod(2), x[..., :2].sum([2, 4])),
        lambda: [torch.randn(2, 4, 3, 16, 5)],
        {"pointwise"},
    ),
    # scalar bookkeeping (batch norms' step counters) shares no buffer: one kernel for all
    "tiny_counters": (
        lambda a, b, c, x: (a + 1, b + 1, c * 2, x.relu()),
        lambda: [torch.tensor(3), torch.tensor(5), torch.tensor(7), torch.randn(64, 64)],
        {"pointwise"},
    ),
    "split_bias_and_norm_grads": (
        lambda g, x: (g.sum([0, 1]), (g * x).sum([0, 1]), x.amax([0, 1])),
        lambda: [torch.randn(8, 512, 48), torch.randn(8, 512, 48)],
        {"outer_reduction"},
    ),
    # a norm's backward: the column sums' first stages are the row kernel's block sums
    # (each program's XBLOCK rows summed down the columns), then one short kernel each
    "rms_norm_backward_row_blocks": (
        _rms_norm_backward,
        lambda: [torch.randn(4096, 384), torch.randn(4096, 384), torch.randn(384)],
        {"persistent_reduction", "outer_reduction"},
    ),
    "layer_norm_backward_row_blocks": (
        _layer_norm_backward,
        lambda: [torch.randn(2, 2048, 256), torch.randn(2, 2048, 256) * 2 + 1, torch.randn(256)],
        {"persistent_reduction", "outer_reduction"},
    ),
    "split_sum_bf16": (
        lambda x: x.sum(0),
        lambda: [torch.randn(6144, 40).to(torch.bfloat16)],
        {"outer_reduction"},
    ),
    # a cheap shared value (a loss gradient from per-row loads) feeds a reduction and a
    # pointwise kernel: recomputed in both, never stored at full size
    "loss_grad_shared_cheap_value": (
        lambda logp, target, scale, total: _log_softmax_grad(
            logp, _nll_grad(target, scale, total, logp.shape[-1])
        ),
        lambda: [
            torch.randn(64, 1000).log_softmax(-1),
            torch.randint(0, 1000, (64,)),
            torch.rand(()),
            torch.tensor(50.0),
        ],
        set(),
    ),
    "math_ops": (
        lambda x, y: (
            torch.log1p(x.abs())
            + torch.expm1(x * 0.1)
            + torch.erf(x)
            + torch.rsqrt(x.abs() + 1)
            + torch.atan2(x, y)
            + torch.pow(x.abs(), 1.5)
            + torch.lgamma(x.abs() + 0.5)
            + torch.floor(x)
            + torch.round(y * 3)
        ),
        lambda: [torch.randn(257), torch.randn(257)],
        {"pointwise"},
    ),
    "where_clamp": (
        lambda x: torch.where(x > 0, x.clamp(max=0.5), x * 0.25).masked_fill(x < -1, 3.0),
        lambda: [torch.randn(300)],
        {"pointwise"},
    ),
    "int_floor_div_mod": (
        lambda a, b: (
            torch.div(a, b, rounding_mode="floor"),
            torch.remainder(a, b),
            torch.div(a, b, rounding_mode="trunc"),
            torch.fmod(a, b),
        ),
        lambda: [
            torch.randint(-50, 50, (200,)),
            torch.randint(1, 7, (200,)) * (torch.randint(0, 2, (200,)) * 2 - 1),
        ],
        {"pointwise"},
    ),
    "float64_constants": (
        lambda x: (x * 0.1 + 1e-12).exp() * 3.3333333333333335,
        lambda: [torch.randn(100, dtype=torch.float64)],
        {"pointwise"},
    ),
    "sum_last": (lambda x: x.sum(-1), lambda: [torch.randn(1000, 37)], {"persistent_reduction"}),
    # a column sum reads along x: an outer reduction (many columns per program)
    "sum_nonlast": (lambda x: x.sum(0), lambda: [torch.randn(37, 50)], {"outer_reduction"}),
    "sum_all_looped": (lambda x: x.sum(), lambda: [torch.randn(71, 91)], {"reduction"}),
    "max_nan_last": (lambda x: x.amax(-1), lambda: [_nan_rows((6, 30))], {"persistent_reduction"}),
    "max_nan_nonlast": (lambda x: x.amax(0), lambda: [_nan_rows((30, 6))], set()),
    "min_nan_looped": (lambda x: x.amin(-1), lambda: [_nan_rows((4, 2500))], {"reduction"}),
    "argmax_ties": (lambda x: x.argmax(-1), lambda: [_ties((20, 33))], {"persistent_reduction"}),
    "argmin_nonlast": (lambda x: x.argmin(0), lambda: [_ties((33, 20))], set()),
    "argmax_nan_looped": (
        lambda x: x.argmax(1),
        lambda: [_nan_rows((3, 3000))],
        {"reduction"},
    ),
    "mean_var": (
        lambda x: (x.mean(-1), x.var(-1), x.std(0, correction=0)),
        lambda: [torch.randn(40, 50) * 3 + 2],
        set(),
    ),
    "var_looped": (lambda x: x.var(-1), lambda: [torch.randn(3, 5001) + 10], {"reduction"}),
    "prod_any_all": (
        lambda x: (x.prod(-1), (x > 1).any(-1), (x > -2).all(0)),
        lambda: [torch.rand(16, 12) + 0.5],
        set(),
    ),
    "softmax_ragged": (
        lambda x: torch.softmax(x, -1),
        lambda: [torch.randn(1000, 37)],
        {"persistent_reduction"},
    ),
    "softmax_looped": (
        lambda x: torch.softmax(x, -1),
        lambda: [torch.randn(8, 3000)],
        {"reduction"},
    ),
    "log_softmax_dim0": (lambda x: torch.log_softmax(x, 0), lambda: [torch.randn(50, 20)], set()),
    # a small table's gradient as a masked sum over positions (not ATen's sorting kernel)
    "embedding_grad_small_table": (
        lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 32, -1, False),
        lambda: [torch.randn(64, 64, 8), torch.randint(0, 32, (64, 64))],
        set(),
    ),
    "embedding_grad_padding_int32": (  # row 1 is the padding row: no gradient
        lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 3, 1, False),
        lambda: [torch.randn(4, 512, 16), torch.randint(0, 3, (4, 512), dtype=torch.int32)],
        set(),
    ),
    # rows past 16K elements: max and sum of exponentials in one online pass (rescaled when
    # the max grows)
    "softmax_online_inf_rows": (
        lambda x: torch.softmax(x, -1),
        lambda: [_inf_rows((6, 20001))],
        {"reduction"},
    ),
    "log_softmax_online_inf_rows": (
        lambda x: torch.log_softmax(x * 10, -1),
        lambda: [_inf_rows((6, 20001))],
        {"reduction"},
    ),
    "softmax_online_split": (  # few long rows: a (max, sum) pair per chunk, then combined
        lambda x: torch.softmax(x, -1),
        lambda: [_inf_rows((6, 32768))],
        set(),
    ),
    # logsumexp of vocabulary rows (the normalizer training graphs save for log-softmax): the
    # same online pass; a row holding +inf is +inf, as eager's
    "logsumexp_online_inf_rows": (
        lambda x: torch.logsumexp(x, -1),
        lambda: [_inf_rows((6, 20001))],
        {"reduction"},
    ),
    "bf16_logsumexp_online_keepdim": (
        lambda x: torch.logsumexp(x * 3, 1, keepdim=True),
        lambda: [torch.randn(16, 20001).bfloat16()],
        {"reduction"},
    ),
    "log_softmax_online_outer": (
        lambda x: torch.log_softmax(x, 0),
        lambda: [torch.randn(20001, 6) * 5],
        {"outer_reduction"},
    ),
    "bf16_log_softmax_online": (
        lambda x: torch.log_softmax(x, -1),
        lambda: [torch.randn(16, 20001).bfloat16() * 4],
        {"reduction"},
    ),
    "layernorm": (
        lambda x, w, b: F.layer_norm(x, (256,), w, b),
        lambda: [torch.randn(64, 256), torch.randn(256), torch.randn(256)],
        {"persistent_reduction"},
    ),
    "layernorm_looped": (
        lambda x, w, b: F.layer_norm(x, (2000,), w, b),
        lambda: [torch.randn(4, 2000) * 2 + 1, torch.randn(2000), torch.randn(2000)],
        {"reduction"},
    ),
    "bf16_pointwise": (
        lambda x, y: (x * y + 1).relu() * 0.5,
        lambda: [torch.randn(1000, 37).bfloat16(), torch.randn(37).bfloat16()],
        {"pointwise"},
    ),
    "bf16_softmax": (
        lambda x: torch.softmax(x, -1),
        lambda: [torch.randn(64, 100).bfloat16()],
        {"persistent_reduction"},
    ),
    "bf16_layernorm": (
        lambda x, w, b: F.layer_norm(x, (96,), w, b),
        lambda: [
            torch.randn(32, 96).bfloat16(),
            torch.randn(96).bfloat16(),
            torch.randn(96).bfloat16(),
        ],
        set(),
    ),
    "bf16_sum_looped": (
        lambda x: x.sum(-1),
        lambda: [torch.randn(4, 5001).bfloat16()],
        {"reduction"},
    ),
    "fp16_pointwise": (
        lambda x: torch.sigmoid(x) * x,
        lambda: [torch.randn(513).half()],
        {"pointwise"},
    ),
    # a cat's inputs and a pad's input are loaded under masks (a lane reads only its own
    # input), no clamped index; bf16 qkv-gradient-like cat, a cat of transposed inputs, and a
    # pad with a negative fill on both sides
    "cat_last_dim_masked": (
        lambda q, k, v: torch.cat([q * 2, k, v.float().bfloat16()], dim=-1),
        lambda: [torch.randn(2, 9, 24).bfloat16() for _ in range(3)],
        {"pointwise"},
    ),
    "cat_transposed_masked": (
        lambda a, b: torch.cat([a.t(), b.t() + 1], dim=0),
        lambda: [torch.randn(7, 5), torch.randn(7, 3)],
        {"pointwise"},
    ),
    "pad_both_sides_masked": (
        lambda x: F.pad(x.relu(), (2, 3, 1, 0), value=-1.5),
        lambda: [torch.randn(2, 3, 6, 5)],
        {"pointwise"},
    ),
    "embedding_gather": (
        lambda idx, w: F.embedding(idx, w) * 2,
        lambda: [torch.randint(0, 50, (7, 9)), torch.randn(50, 16)],
        {"pointwise"},
    ),
    "gather_dim1": (
        lambda x, idx: torch.gather(x, 1, idx) + 1,
        lambda: [torch.randn(10, 20), torch.randint(0, 20, (10, 5))],
        {"pointwise"},
    ),
}

OUT_OF_BOUNDS = (
    lambda idx, w: F.embedding(idx, w) + 1,
    lambda: [torch.tensor([1, 2, 60]), torch.randn(50, 4)],
)


def _with_outliers(x):
    x[:, :, 0, 0] = 80.0
    x[:, :, 28, 0] = -20.0
    return x


def _tol(dtype):
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=2e-2)
    if dtype == torch.float16:
        return dict(rtol=1e-3, atol=1e-3)
    if dtype == torch.float64:
        return dict(rtol=1e-12, atol=1e-12)
    return dict(rtol=2e-5, atol=2e-5)


def _reference(fn, inputs):
    """Eager on float64 copies of fp32 inputs (reduced floats: eager in their own dtype,
    which computes in fp32 internally), cast back to each output's eager dtype."""
    with torch.no_grad():
        eager = fn(*inputs)
        up = [a.double() if a.dtype == torch.float32 else a for a in inputs]
        ref = fn(*up)
    eager = eager if isinstance(eager, (tuple, list)) else (eager,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    return [r.to(e.dtype) for r, e in zip(ref, eager)]


def _compile(fn, inputs, name=None):
    from helpers import aten_graph

    from danlu_inductor.pipeline.triton import compile_fx_triton

    options = CASE_OPTIONS.get(name)
    return _all_triton(compile_fx_triton(aten_graph(fn, *inputs), list(inputs), options))


def _all_triton(c):
    """The backend's fallbacks keep results right; these tests are about its kernels."""
    assert c.report.get("backend") == "triton", c.report
    assert not c.report.get("triton_fallbacks"), c.report["triton_fallbacks"]
    return c


def _weight_casts(x, w1, b1, w2, b2, steps):
    bf16 = torch.bfloat16
    # (the weight scaled, not rounded, for the matmul: the interpreter's bf16 rounding is
    # not the GPU's, which an fp32 product would show)
    h = x @ (w1 * 2).t()
    return h, b1.to(bf16), w2.to(bf16), b2 * 3, steps + 1


CASES["grouped_input_kernels"] = (
    # a mixed-precision layer's casts of its weights and biases (and a step counter): one
    # grouped kernel (codegen/triton/grouped.py) instead of one kernel each
    _weight_casts,
    lambda: [
        torch.randn(64, 96),
        torch.randn(130, 96),
        torch.randn(130),
        torch.randn(70, 2000),
        torch.randn(2000),
        torch.tensor(3),
    ],
    {"pointwise"},
)


def _gradient_casts(x, a, b, c):
    # a mixed-precision backward's end: weight gradients from library matmuls (16-bit), then
    # each cast to its float32 parameter's dtype, one after the other: one grouped kernel
    xt = x.t()
    return (xt @ a).float(), (xt @ b).float(), (xt @ c).float()


CASES["grouped_gradient_casts"] = (
    _gradient_casts,
    lambda: [
        torch.randn(64, n, dtype=torch.bfloat16) for n in (48, 40, 130, 8)
    ],  # 16-bit already: the interpreter rounds fp32 -> bf16 unlike torch
    {"pointwise"},
)


def _residual_chain(x, *rest):
    """A residual stack's backward recompute: every layer's residual (the input plus the
    branch results so far) normalized by its saved row statistics, then the last one's row
    sums. Fused whole it would load and store 120 buffers."""
    outs, r = [], x
    for a, mean, rstd in zip(rest[0::3], rest[1::3], rest[2::3]):
        r = r + a
        outs.append((r - mean) * rstd)
    return (*outs, (r * outs[-1]).sum(-1))


CASES["residual_chain_many_streams"] = (
    _residual_chain,
    lambda: (
        [torch.randn(32, 96)]
        + [
            t
            for _ in range(30)
            for t in (torch.randn(32, 96), torch.randn(32, 1), torch.rand(32, 1))
        ]
    ),
    {"pointwise", "persistent_reduction"},
)


def _bias_then_channel_norm(x, b, w):
    y = x + b[:, None, None]  # channels-last, as x: stored for the caller (a saved value)
    z = torch.nn.functional.layer_norm(y.permute(0, 2, 3, 1), (y.shape[1],), w)
    return y, z


# a channels-last [N, C, H, W] value beside a layer norm over C ([N, H, W | C] rows):
# ConvNeXt's convolution output plus bias, saved for the backward. It is stored from the
# norm's kernel, its dims in memory order, not by a kernel of its own at the forward's end
CASES["channels_last_value_in_channel_norm"] = (
    _bias_then_channel_norm,
    lambda: [
        torch.randn(3, 40, 7, 9).to(memory_format=torch.channels_last),
        torch.randn(40),
        torch.randn(40),
    ],
    {"persistent_reduction"},
)


def _head_log_softmax(x, w, g):
    logits = x @ w.t()
    return logits, (logits.float().log_softmax(-1) * g).sum()


# a language-model head over a vocabulary misaligned in 16-bit rows (GPT-2's 50257, here
# 16389): with split_unaligned_columns, two library calls write one buffer with padded rows,
# which the log-softmax reads, and the logits are returned with those rows
CASES["lm_head_split_columns"] = (
    _head_log_softmax,
    lambda: [
        torch.randn(64, 128).to(torch.bfloat16),
        (torch.randn(16389, 128) / 8).to(torch.bfloat16),
        torch.randn(64, 16389),
    ],
    {"reduction"},
)


def _conv_backward_with_bias(g, x, w):
    return torch.ops.aten.convolution_backward(
        g, x, w, [w.shape[0]], [1, 1], [3, 3], [1, 1], False, [0, 0], x.shape[1], [True] * 3
    )


# a depthwise convolution's backward with its bias's gradient (ConvNeXt's): the library
# computes the input's and weight's gradients, the bias's is a column sum of the
# channels-last output gradient in a generated kernel
CASES["conv_backward_bias_grad"] = (
    _conv_backward_with_bias,
    lambda: [
        torch.randn(4, 24, 9, 9).to(memory_format=torch.channels_last),
        torch.randn(4, 24, 9, 9).to(memory_format=torch.channels_last),
        torch.randn(24, 1, 7, 7) * 0.2,
    ],
    {"outer_reduction"},
)

# danlu_inductor options a case compiles with
CASE_OPTIONS = {
    "grouped_input_kernels": {"group_input_kernels": True},
    "grouped_gradient_casts": {"group_input_kernels": True},
    "lm_head_split_columns": {"split_unaligned_columns": True},
}


# cases whose kernel count says a layout decision worked: the pointwise result is stored
# channels-last for the convolution, whose channels-last output then needs no copy
KERNEL_COUNTS = {
    "conv_after_channels_last_pointwise": 1,
    "channels_last_value_in_channel_norm": 1,
    "split_sum_outer": 2,  # partial sums over chunks, then the sum of the partials
    "split_bias_and_norm_grads": 2,  # three reductions, fused in each stage
    # the chunks' sums and squared deviations, their combination, the normalization
    "batch_norm_training_split_stats": 3,
    "batch_norm_training_split_stats_channels_last": 3,
    "batch_norm_training_short_extent_channels_last": 3,  # 3136 values: 8 chunks of 392
    "split_var_mean_offset": 2,
    "tiny_counters": 2,  # the three counters, the relu
    "grouped_gradient_casts": 1,  # the three results' casts, grouped
    # the log-softmax's two passes and the sum's second stage: no copy of the padded weight
    "lm_head_split_columns": 3,
    # the scaled weight, the casts, the scaled bias and the counter: one grouped kernel
    "grouped_input_kernels": 1,
    # the row kernel with the block sums, the partials summed in groups, the groups' sums
    "rms_norm_backward_row_blocks": 3,
    "layer_norm_backward_row_blocks": 3,
    "conv_backward_bias_grad": 1,  # the bias's gradient; the library the rest
}


# cases that must make kernels of these kinds only
ONLY_KINDS = {"short_reductions_unrolled": {"pointwise"}}


# cases whose every kernel loads and stores at most this many buffers (scheduler's
# MAX_GPU_KERNEL_STREAMS: past it a kernel's build time, not its run time, grows)
MAX_POINTERS = {"residual_chain_many_streams": 48}


# cases whose row kernel also sums each program's block of rows down the columns
ROW_BLOCK_SUMS = ("rms_norm_backward_row_blocks", "layer_norm_backward_row_blocks")


# cases whose every load is masked by its range, not clamped into it
MASKED_LOADS = ("cat_last_dim_masked", "cat_transposed_masked", "pad_both_sides_masked")


# cases whose kernel reads each row this many times (loops over R, each a loop over whole
# blocks and one over the partial last block): past 16K elements (and
# unsplit: an odd length), a softmax's max and sum of exponentials in one online loop, then
# the normalized store; shorter rows a loop each for the max, the sum and the store
ROW_LOOPS = {
    "softmax_looped": 3,
    "softmax_online_inf_rows": 2,
    "log_softmax_online_inf_rows": 2,
    "bf16_log_softmax_online": 2,
    "logsumexp_online_inf_rows": 1,
    "bf16_logsumexp_online_keepdim": 1,
}


# cases whose 16-bit matmul results are returned with rows padded to 16 bytes (as
# torch.compile returns them), not in eager's strides
PADDED_ROW_OUTPUTS = ("lm_head_split_columns",)


# cases that must allocate only this many buffers of a full-size shape (the outputs)
FULL_SIZE_BUFFERS = {"loss_grad_shared_cheap_value": ("[64, 1000]", 1)}


def run_interpret(name):
    fn, make, kinds = CASES[name]
    inputs = make()
    c = _compile(fn, inputs, name)
    got = c(*[a.clone() for a in inputs])
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = _reference(fn, inputs)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        torch.testing.assert_close(g, r, equal_nan=True, **_tol(r.dtype))
        if name in PADDED_ROW_OUTPUTS and g.dim() == 2 and g.shape[-1] % 8:
            assert g.stride() == (g.shape[-1] + 8 - g.shape[-1] % 8, 1), g.stride()
        elif r.numel() > 1 and len(set(r.stride())) == r.dim():
            assert g.stride() == r.stride(), (g.stride(), r.stride())
    made = {a.kind for a in c.artifacts}
    assert kinds <= made, (kinds, made)
    if name in ONLY_KINDS:
        assert made == ONLY_KINDS[name], made
    if name in FULL_SIZE_BUFFERS:
        shape, count = FULL_SIZE_BUFFERS[name]
        stored = c.loop_ir().count(f"Pointwise(ranges={shape})")
        assert stored == count, c.loop_ir()
    if name in MASKED_LOADS:
        source = c.kernel_source or ""
        assert "tl.load(" in source and "tl.minimum(tl.maximum(" not in source, source
        assert " <= " in source, source  # the loads' range tests
    if name in ROW_LOOPS:
        loops = (c.kernel_source or "").count("for roffset in range(0, ")  # whole blocks
        assert loops == ROW_LOOPS[name], c.kernel_source
    if name in KERNEL_COUNTS:
        assert len(c.artifacts) == KERNEL_COUNTS[name], [a.name for a in c.artifacts]
    if name in MAX_POINTERS:
        pointers = [sum(t.startswith("*") for t in a.signature.values()) for a in c.artifacts]
        assert max(pointers) <= MAX_POINTERS[name], pointers
    if name in ROW_BLOCK_SUMS:
        source = c.kernel_source or ""
        assert "xchunk = tl.program_id(0)" in source and ", 0)[None, :]" in source, source
    assert "fallback_reason" not in c.report, c.report["fallback_reason"]
    return {"kernels": len(c.artifacts), "kinds": sorted(made)}


def run_out_of_bounds():
    fn, make = OUT_OF_BOUNDS
    inputs = make()
    c = _compile(fn, inputs)
    try:
        c(*inputs)
    except IndexError as e:
        return {"raised": str(e)}
    raise AssertionError("out-of-bounds gather index did not raise")


def run_aot(name):
    from danlu_inductor.codegen.triton.backend import aot_compile

    fn, make, _ = CASES[name]
    c = _compile(fn, make(), name)
    out = []
    for art in c.artifacts:
        compiled = aot_compile(art, c.launchers[art.name])
        asm = compiled.asm
        assert "ptx" in asm and ".target sm_90" in asm["ptx"], sorted(asm)
        out.append({"kind": art.kind, "cubin": len(asm.get("cubin", b""))})
    return {"kernels": out}


def run_cuda(name, bench):
    """Real GPU run: inputs on cuda, reference from eager on float64 copies."""
    fn, make, kinds = CASES[name]
    cpu_inputs = make()
    inputs = [a.cuda() for a in cpu_inputs]
    c = _compile(fn, inputs, name)
    got = c(*[a.clone() for a in inputs])
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = _reference(fn, inputs)
    for g, r in zip(got, ref):
        assert g.device.type == "cuda" and g.shape == r.shape and g.dtype == r.dtype
        torch.testing.assert_close(g, r, equal_nan=True, **_tol(r.dtype))
    info = {"kernels": len(c.artifacts), "kinds": sorted({a.kind for a in c.artifacts})}
    info["configs"] = [str(fn_.config) for fn_ in c.launchers.values()]
    graph = None
    if not any(a.uses_err for a in c.artifacts):  # the gather bounds check syncs
        # capture the compiled call in a CUDA graph, replay it on new data
        static = [a.clone() for a in inputs]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = c(*static)
        fresh = make()
        for st, f in zip(static, fresh):
            st.copy_(f)
        graph.replay()
        out = out if isinstance(out, (tuple, list)) else (out,)
        for g, r in zip(out, _reference(fn, [f.cuda() for f in fresh])):
            torch.testing.assert_close(g, r, equal_nan=True, **_tol(r.dtype))
        info["cuda_graph"] = "replay matches eager"
    if bench:
        from triton.testing import do_bench

        with torch.no_grad():
            info["eager_us"] = round(1000 * do_bench(lambda: fn(*inputs)), 2)
            eg = torch.cuda.CUDAGraph()
            fn(*inputs)
            with torch.cuda.graph(eg):
                fn(*inputs)
            info["eager_graph_us"] = round(1000 * do_bench(eg.replay), 2)
        info["compiled_us"] = round(1000 * do_bench(lambda: c(*inputs)), 2)
        if graph is not None:
            info["compiled_graph_us"] = round(1000 * do_bench(graph.replay), 2)
    return info


BENCH = {
    "softmax_large": (lambda x: torch.softmax(x, -1), lambda: [torch.randn(8192, 1000)]),
    "softmax_long_rows": (lambda x: torch.softmax(x, -1), lambda: [torch.randn(256, 30000)]),
    # a language model's loss rows (GPT-2: 4096 positions, 50257 words)
    "bf16_log_softmax_vocab": (
        lambda x: torch.log_softmax(x, -1),
        lambda: [torch.randn(4096, 50257).bfloat16()],
    ),
    "layernorm_large": (
        lambda x, w, b: F.layer_norm(x, (1024,), w, b),
        lambda: [torch.randn(16384, 1024), torch.randn(1024), torch.randn(1024)],
    ),
    "gelu_chain_large": (_gelu_chain, lambda: [torch.randn(4096, 4096)]),
    "transpose_large": (
        lambda x: x.t().contiguous() * 2,
        lambda: [torch.randn(4096, 4096)],
    ),
    "bf16_layernorm_large": (
        lambda x, w, b: F.layer_norm(x, (4096,), w, b),
        lambda: [
            torch.randn(4096, 4096).bfloat16(),
            torch.randn(4096).bfloat16(),
            torch.randn(4096).bfloat16(),
        ],
    ),
}


def run_opinfo_sweep(device="cpu", deadline=None):
    """The OpInfo samples of the C++ backend's sweep (first sample per op and dtype,
    contiguous and strided) through the Triton backend. -> {op: [failure, ...]}"""
    import collections
    import warnings

    import opinfo_cases

    from danlu_inductor.pipeline.triton import compile_fx_triton

    opinfo_cases.SAMPLES_PER_DTYPE = 1
    failures = collections.defaultdict(list)
    counts = collections.Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases, _ = opinfo_cases.build_cases()
        for c in cases:
            if deadline is not None and time.time() > deadline:
                break
            counts[c["base"]] += 1
            try:
                inputs = [t.to(device) for t in c["inputs"]]
                g = _all_triton(compile_fx_triton(c["gm"], inputs))
                got = g(*[t.clone() for t in inputs])
                assert "fallback_reason" not in g.report, g.report["fallback_reason"]
                got = torch.utils._pytree.tree_map(
                    lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, got
                )
                tol = {"rtol": 2e-6, "atol": 1e-4} if c["base"] in ("sinh", "cosh") else {}
                torch.testing.assert_close(got, c["expected"], equal_nan=True, **tol)
            except Exception as e:
                failures[c["base"]].append(f"{c['id']}: {type(e).__name__}: {str(e)[:300]}")
    return {"samples": dict(counts), "failures": dict(failures), "of": len(cases)}


def main(mode, out_path):
    if mode == "cuda":
        CASES.update({k: (f, m, set()) for k, (f, m) in BENCH.items()})
    names = list(CASES)
    if mode == "cuda":
        names.append("opinfo")
    if mode == "interpret":
        assert os.environ.get("TRITON_INTERPRET") == "1"
        names += ["out_of_bounds", "opinfo"]
    # DANLU_CASES="a,b": only the cases whose names contain one of these (a device call that
    # checks what one session changed, within its time)
    wanted = [w for w in os.environ.get("DANLU_CASES", "").split(",") if w]
    if wanted:
        names = [n for n in names if any(w in n for w in wanted)]

    def run_one(name):
        if name == "out_of_bounds":
            return run_out_of_bounds()
        if name == "opinfo" and mode == "cuda":
            seconds = float(os.environ.get("DANLU_OPINFO_SECONDS", "360"))
            return run_opinfo_sweep("cuda", deadline=time.time() + seconds)
        if name == "opinfo":
            return run_opinfo_sweep()
        if mode == "interpret":
            return run_interpret(name)
        if mode == "cuda":
            return run_cuda(name, bench=name in BENCH)
        return run_aot(name)

    record_cases(names, run_one, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
