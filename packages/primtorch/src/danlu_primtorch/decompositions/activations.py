"""Activations and their backward ops; softmax / log_softmax and theirs."""

from __future__ import annotations

import math

import torch

from danlu_primtorch.decompositions._helpers import opmath, to_dtype, where
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


@register(aten.relu.default)
def relu(self):
    return where(aten.le.Scalar(self, 0), 0, self)


@register(aten.threshold.default)
def threshold(self, threshold, value):
    return where(aten.le.Scalar(self, threshold), value, self)


@register(aten.threshold_backward.default)
def threshold_backward(grad_output, self, threshold):
    return where(aten.le.Scalar(self, threshold), 0, grad_output)


@register(aten.leaky_relu.default)
def leaky_relu(self, negative_slope=0.01):
    return where(aten.gt.Scalar(self, 0), self, aten.mul.Tensor(self, negative_slope))


@register(aten.leaky_relu_backward.default)
def leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    return where(aten.gt.Scalar(self, 0), grad_output, aten.mul.Tensor(grad_output, negative_slope))


@register(aten.hardtanh.default)
def hardtanh(self, min_val=-1, max_val=1):
    # unlike clamp, hardtanh keeps the input's dtype (an int tensor stays int)
    lo = aten.scalar_tensor.default(min_val, dtype=self.dtype, device=self.device)
    hi = aten.scalar_tensor.default(max_val, dtype=self.dtype, device=self.device)
    return aten.minimum.default(aten.maximum.default(self, lo), hi)


@register(aten.hardtanh_backward.default)
def hardtanh_backward(grad_output, self, min_val, max_val):
    outside = aten.logical_or.default(aten.le.Scalar(self, min_val), aten.ge.Scalar(self, max_val))
    return where(outside, 0, grad_output)


@register(aten.hardsigmoid.default)
def hardsigmoid(self):
    return aten.div.Tensor(aten.clamp.default(aten.add.Tensor(self, 3), 0, 6), 6)


@register(aten.hardsigmoid_backward.default)
def hardsigmoid_backward(grad_output, self):
    inside = aten.logical_and.default(aten.gt.Scalar(self, -3.0), aten.lt.Scalar(self, 3.0))
    return where(inside, aten.div.Tensor(grad_output, 6), 0)


@register(aten.hardswish.default)
def hardswish(self):
    return aten.div.Tensor(
        aten.mul.Tensor(self, aten.clamp.default(aten.add.Tensor(self, 3), 0, 6)), 6
    )


@register(aten.hardswish_backward.default)
def hardswish_backward(grad_output, self):
    mid = aten.mul.Tensor(grad_output, aten.add.Tensor(aten.div.Tensor(self, 3), 0.5))
    out = where(aten.lt.Scalar(self, 3), mid, grad_output)
    return where(aten.le.Scalar(self, -3), 0, out)


@register(aten.hardshrink.default)
def hardshrink(self, lambd=0.5):
    return where(aten.le.Scalar(aten.abs.default(self), lambd), 0, self)


@register(aten.hardshrink_backward.default)
def hardshrink_backward(grad_out, self, lambd):
    return where(aten.le.Scalar(aten.abs.default(self), lambd), 0, grad_out)


@register(aten.softshrink.default)
def softshrink(self, lambd=0.5):
    out = where(aten.gt.Scalar(self, lambd), aten.sub.Tensor(self, lambd), 0)
    return where(aten.lt.Scalar(self, -lambd), aten.add.Tensor(self, lambd), out)


@register(aten.softshrink_backward.default)
def softshrink_backward(grad_output, self, lambd):
    return where(aten.le.Scalar(aten.abs.default(self), lambd), 0, grad_output)


@register(aten.elu.default)
def elu(self, alpha=1, scale=1, input_scale=1):
    neg = aten.mul.Tensor(aten.expm1.default(aten.mul.Tensor(self, input_scale)), alpha * scale)
    return where(aten.gt.Scalar(self, 0), aten.mul.Tensor(self, scale), neg)


@register(aten.elu_backward.default)
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    if is_result:
        neg = aten.mul.Tensor(
            grad_output,
            aten.mul.Tensor(aten.add.Tensor(self_or_result, alpha * scale), input_scale),
        )
    else:
        e = aten.exp.default(aten.mul.Tensor(self_or_result, input_scale))
        neg = aten.mul.Tensor(grad_output, aten.mul.Tensor(e, alpha * scale * input_scale))
    return where(aten.le.Scalar(self_or_result, 0), neg, aten.mul.Tensor(grad_output, scale))


@register(aten.celu.default)
def celu(self, alpha=1.0):
    return elu(self, alpha, 1.0, 1.0 / alpha)


@register(aten.gelu.default)
def gelu(self, *, approximate="none"):
    x = self
    if approximate == "tanh":
        inner = aten.mul.Tensor(
            aten.add.Tensor(
                x, aten.mul.Tensor(aten.mul.Tensor(aten.mul.Tensor(x, x), x), 0.044715)
            ),
            math.sqrt(2.0 / math.pi),
        )
        return aten.mul.Tensor(
            aten.mul.Tensor(x, 0.5), aten.add.Tensor(aten.tanh.default(inner), 1)
        )
    cdf = aten.mul.Tensor(
        aten.add.Tensor(aten.erf.default(aten.mul.Tensor(x, math.sqrt(0.5))), 1), 0.5
    )
    return aten.mul.Tensor(x, cdf)


@register(aten.gelu_backward.default)
def gelu_backward(grad_output, self, *, approximate="none"):
    x = self
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        x2 = aten.mul.Tensor(x, x)
        inner = aten.mul.Tensor(
            aten.add.Tensor(x, aten.mul.Tensor(aten.mul.Tensor(x2, x), 0.044715)), k
        )
        t = aten.tanh.default(inner)
        left = aten.mul.Tensor(aten.add.Tensor(t, 1), 0.5)
        dinner = aten.mul.Tensor(aten.add.Tensor(aten.mul.Tensor(x2, 3 * 0.044715), 1), k)
        right = aten.mul.Tensor(
            aten.mul.Tensor(aten.mul.Tensor(x, 0.5), aten.rsub.Scalar(aten.mul.Tensor(t, t), 1)),
            dinner,
        )
        return aten.mul.Tensor(grad_output, aten.add.Tensor(left, right))
    cdf = aten.mul.Tensor(
        aten.add.Tensor(aten.erf.default(aten.mul.Tensor(x, math.sqrt(0.5))), 1), 0.5
    )
    pdf = aten.mul.Tensor(
        aten.exp.default(aten.mul.Tensor(aten.mul.Tensor(x, x), -0.5)), 1.0 / math.sqrt(2 * math.pi)
    )
    return aten.mul.Tensor(grad_output, aten.add.Tensor(cdf, aten.mul.Tensor(x, pdf)))


@register(aten.silu.default)
def silu(self):
    return aten.mul.Tensor(self, aten.sigmoid.default(self))


@register(aten.silu_backward.default)
def silu_backward(grad_output, self):
    s = aten.sigmoid.default(self)
    return aten.mul.Tensor(
        grad_output,
        aten.mul.Tensor(s, aten.add.Tensor(aten.mul.Tensor(self, aten.rsub.Scalar(s, 1)), 1)),
    )


@register(aten.mish.default)
def mish(self):
    return aten.mul.Tensor(self, aten.tanh.default(aten.softplus.default(self)))


@register(aten.mish_backward.default)
def mish_backward(grad_output, self):
    s = aten.sigmoid.default(self)
    t = aten.tanh.default(aten.softplus.default(self))
    d = aten.add.Tensor(
        t, aten.mul.Tensor(aten.mul.Tensor(self, s), aten.rsub.Scalar(aten.mul.Tensor(t, t), 1))
    )
    return aten.mul.Tensor(grad_output, d)


@register(aten.softplus.default)
def softplus(self, beta=1, threshold=20):
    bx = aten.mul.Tensor(self, beta)
    soft = aten.div.Tensor(aten.log1p.default(aten.exp.default(bx)), beta)
    return where(aten.gt.Scalar(bx, threshold), self, soft)


@register(aten.softplus_backward.default)
def softplus_backward(grad_output, self, beta, threshold):
    bx = aten.mul.Tensor(self, beta)
    z = aten.exp.default(bx)
    g = aten.div.Tensor(aten.mul.Tensor(grad_output, z), aten.add.Tensor(z, 1))
    return where(aten.gt.Scalar(bx, threshold), grad_output, g)


@register(aten.sigmoid_backward.default)
def sigmoid_backward(grad_output, output):
    return aten.mul.Tensor(grad_output, aten.mul.Tensor(aten.rsub.Scalar(output, 1), output))


@register(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    return aten.mul.Tensor(grad_output, aten.rsub.Scalar(aten.mul.Tensor(output, output), 1))


@register(aten.logit_backward.default)
def logit_backward(grad_output, self, eps=None):
    g = aten.div.Tensor(grad_output, aten.mul.Tensor(self, aten.rsub.Scalar(self, 1)))
    if eps is None:
        out_of_range = aten.logical_or.default(aten.lt.Scalar(self, 0), aten.gt.Scalar(self, 1))
        return where(out_of_range, float("nan"), g)
    outside = aten.logical_or.default(aten.lt.Scalar(self, eps), aten.gt.Scalar(self, 1 - eps))
    return where(outside, 0, g)


@register(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(self):
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); the buffer output is unused by our backward
    m = aten.minimum.default(
        self, aten.scalar_tensor.default(0, dtype=self.dtype, device=self.device)
    )
    z = aten.exp.default(aten.neg.default(aten.abs.default(self)))
    # the second output is ATen's CPU buffer exp(-|x|)
    return aten.sub.Tensor(m, aten.log1p.default(z)), z


@register(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad_output, self, buffer):
    # d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x)
    return aten.mul.Tensor(grad_output, aten.sigmoid.default(aten.neg.default(self)))


@register(aten.glu.default)
def glu(self, dim=-1):
    n = self.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    a = aten.slice.Tensor(self, dim, 0, n // 2)
    b = aten.slice.Tensor(self, dim, n // 2, n)
    return aten.mul.Tensor(a, aten.sigmoid.default(b))


@register(aten.glu_backward.default)
def glu_backward(grad_output, self, dim):
    n = self.shape[dim]
    a = aten.slice.Tensor(self, dim, 0, n // 2)
    sb = aten.sigmoid.default(aten.slice.Tensor(self, dim, n // 2, n))
    ga = aten.mul.Tensor(grad_output, sb)
    gb = aten.mul.Tensor(aten.mul.Tensor(ga, a), aten.rsub.Scalar(sb, 1))
    return aten.cat.default([ga, gb], dim)


@register(aten._prelu_kernel.default)
def prelu_kernel(self, weight):
    return where(aten.gt.Scalar(self, 0), self, aten.mul.Tensor(weight, self))


@register(aten._prelu_kernel_backward.default)
def prelu_kernel_backward(grad_output, self, weight):
    pos = aten.gt.Scalar(self, 0)
    gx = where(pos, grad_output, aten.mul.Tensor(weight, grad_output))
    # the weight gradient comes back unreduced (input's shape); prelu's autograd sums it
    gw = where(pos, 0, aten.mul.Tensor(self, grad_output))
    return gx, gw


@register(aten.rrelu_with_noise_backward.default)
def rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training, self_is_result):
    if training and upper - lower > 1e-6:
        return aten.mul.Tensor(grad_output, noise)
    return leaky_relu_backward(grad_output, self, (lower + upper) / 2, self_is_result)


# --- softmax family: subtract the max for stability, reduce in the op-math dtype.
def _softmax_parts(x, dim, half_to_float):
    if half_to_float:
        x = to_dtype(x, torch.float32)
    compute = opmath(x.dtype)
    xc = to_dtype(x, compute)
    if xc.numel() == 0:
        return xc, xc, x.dtype
    m = aten.amax.default(xc, [dim], True)
    # rows that are all -inf shift by 0 (their softmax is NaN as in eager: 0/0). A +inf max
    # is kept, so its row is NaN as in eager (inf - inf), not one-hot.
    m = where(aten.eq.Scalar(m, float("-inf")), 0.0, m)
    shifted = aten.sub.Tensor(xc, m)
    return shifted, m, x.dtype


@register(aten._softmax.default)
def softmax(self, dim, half_to_float):
    shifted, _, out_dtype = _softmax_parts(self, dim, half_to_float)
    if shifted.numel() == 0:
        return to_dtype(shifted, out_dtype)
    e = aten.exp.default(shifted)
    return to_dtype(aten.div.Tensor(e, aten.sum.dim_IntList(e, [dim], True)), out_dtype)


@register(aten._log_softmax.default)
def log_softmax(self, dim, half_to_float):
    shifted, _, out_dtype = _softmax_parts(self, dim, half_to_float)
    if shifted.numel() == 0:
        return to_dtype(shifted, out_dtype)
    lse = aten.log.default(aten.sum.dim_IntList(aten.exp.default(shifted), [dim], True))
    return to_dtype(aten.sub.Tensor(shifted, lse), out_dtype)


@register(aten._safe_softmax.default)
def safe_softmax(self, dim, dtype=None):
    x = to_dtype(self, dtype)
    out = softmax(x, dim, False)
    all_masked = aten.all.dim(aten.eq.Scalar(x, float("-inf")), dim, True)
    return where(all_masked, 0, out)


@register(aten._softmax_backward_data.default)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    compute = opmath(output.dtype)
    g, y = to_dtype(grad_output, compute), to_dtype(output, compute)
    gy = aten.mul.Tensor(g, y)
    out = aten.sub.Tensor(gy, aten.mul.Tensor(y, aten.sum.dim_IntList(gy, [dim], True)))
    return to_dtype(out, input_dtype)


@register(aten._log_softmax_backward_data.default)
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    compute = opmath(output.dtype)
    g, y = to_dtype(grad_output, compute), to_dtype(output, compute)
    s = aten.sum.dim_IntList(g, [dim], True)
    out = aten.sub.Tensor(g, aten.mul.Tensor(aten.exp.default(y), s))
    return to_dtype(out, input_dtype)
