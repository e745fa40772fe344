"""Loss functions and their backward ops (reduction: 0 none, 1 mean, 2 sum, as ATen encodes it)."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import iota, to_dtype, where
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten

NONE, MEAN, SUM = 0, 1, 2


def _reduce(x, reduction):
    if reduction == MEAN:
        return aten.mean.dim(x, [], False)
    if reduction == SUM:
        return aten.sum.dim_IntList(x, [], False)
    return x


def _grad_scale(grad_output, x, reduction):
    """The incoming gradient, broadcast to the elementwise loss shape."""
    if reduction == MEAN:
        return aten.div.Tensor(grad_output, max(x.numel(), 1) if x.numel() else 0)
    return grad_output


@register(aten.mse_loss.default)
def mse_loss(self, target, reduction=MEAN):
    d = aten.sub.Tensor(self, target)
    return _reduce(aten.mul.Tensor(d, d), reduction)


@register(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, self, target, reduction):
    g = _grad_scale(grad_output, self, reduction)
    return aten.mul.Tensor(aten.mul.Tensor(aten.sub.Tensor(self, target), 2), g)


@register(aten.smooth_l1_loss.default)
def smooth_l1_loss(self, target, reduction=MEAN, beta=1.0):
    d = aten.abs.default(aten.sub.Tensor(self, target))
    if beta == 0:
        return _reduce(d, reduction)
    quad = aten.div.Tensor(aten.mul.Tensor(aten.mul.Tensor(d, d), 0.5), beta)
    return _reduce(where(aten.lt.Scalar(d, beta), quad, aten.sub.Tensor(d, 0.5 * beta)), reduction)


@register(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    g = _grad_scale(grad_output, self, reduction)
    d = aten.sub.Tensor(self, target)
    sign = aten.sign.default(d)
    if beta == 0:
        return aten.mul.Tensor(sign, g)
    inner = where(aten.lt.Scalar(aten.abs.default(d), beta), aten.div.Tensor(d, beta), sign)
    return aten.mul.Tensor(inner, g)


@register(aten.huber_loss.default)
def huber_loss(self, target, reduction=MEAN, delta=1.0):
    d = aten.abs.default(aten.sub.Tensor(self, target))
    quad = aten.mul.Tensor(aten.mul.Tensor(d, d), 0.5)
    lin = aten.mul.Tensor(aten.sub.Tensor(d, 0.5 * delta), delta)
    return _reduce(where(aten.lt.Scalar(d, delta), quad, lin), reduction)


@register(aten.huber_loss_backward.default)
def huber_loss_backward(grad_output, self, target, reduction, delta):
    g = _grad_scale(grad_output, self, reduction)
    d = aten.sub.Tensor(self, target)
    inner = where(
        aten.lt.Scalar(d, -delta),
        -delta,
        where(aten.gt.Scalar(d, delta), delta, d),
    )
    return aten.mul.Tensor(inner, g)


@register(aten.soft_margin_loss.default)
def soft_margin_loss(self, target, reduction=MEAN):
    loss = aten.log1p.default(aten.exp.default(aten.neg.default(aten.mul.Tensor(self, target))))
    return _reduce(loss, reduction)


@register(aten.soft_margin_loss_backward.default)
def soft_margin_loss_backward(grad_output, self, target, reduction):
    g = _grad_scale(grad_output, self, reduction)
    z = aten.exp.default(aten.neg.default(aten.mul.Tensor(self, target)))
    inner = aten.div.Tensor(aten.mul.Tensor(aten.neg.default(target), z), aten.add.Tensor(z, 1))
    return aten.mul.Tensor(inner, g)


@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(self, target, weight=None, reduction=MEAN):
    # log terms clamped at -100, as ATen does, so 0 and 1 probabilities stay finite
    log_p = aten.clamp.default(aten.log.default(self), -100)
    log_1mp = aten.clamp.default(aten.log1p.default(aten.neg.default(self)), -100)
    loss = aten.neg.default(
        aten.add.Tensor(
            aten.mul.Tensor(target, log_p), aten.mul.Tensor(aten.rsub.Scalar(target, 1), log_1mp)
        )
    )
    if weight is not None:
        loss = aten.mul.Tensor(loss, weight)
    return _reduce(loss, reduction)


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=MEAN):
    g = _grad_scale(grad_output, self, reduction)
    eps = 1e-12
    denom = aten.clamp.default(aten.mul.Tensor(self, aten.rsub.Scalar(self, 1)), eps)
    inner = aten.div.Tensor(aten.sub.Tensor(self, target), denom)
    if weight is not None:
        inner = aten.mul.Tensor(inner, weight)
    return aten.mul.Tensor(inner, g)


@register(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=MEAN):
    # (1 - t) x + (1 + (pw - 1) t) * log(1 + exp(-x)), with log1p(exp(-x)) written stably
    log_sig_neg = aten.add.Tensor(
        aten.log1p.default(aten.exp.default(aten.neg.default(aten.abs.default(self)))),
        aten.clamp.default(aten.neg.default(self), 0),
    )
    if pos_weight is not None:
        lw = aten.add.Tensor(aten.mul.Tensor(aten.sub.Tensor(pos_weight, 1), target), 1)
        loss = aten.add.Tensor(
            aten.mul.Tensor(aten.rsub.Scalar(target, 1), self), aten.mul.Tensor(lw, log_sig_neg)
        )
    else:
        loss = aten.add.Tensor(aten.mul.Tensor(aten.rsub.Scalar(target, 1), self), log_sig_neg)
    if weight is not None:
        loss = aten.mul.Tensor(loss, weight)
    return _reduce(loss, reduction)


def _nll_picked(self, target, weight, ignore_index):
    """Per-sample -w[t] * self[n, t] (and the weights), for [N, C, *] or [C] inputs."""
    chan = 0 if self.dim() == 1 else 1
    safe_t = where(aten.eq.Scalar(target, ignore_index), 0, target)
    picked = aten.squeeze.dims(
        aten.gather.default(self, chan, aten.unsqueeze.default(safe_t, chan)), [chan]
    )
    keep = aten.ne.Scalar(target, ignore_index)
    if weight is not None:
        w = _take(weight, safe_t)
    else:
        w = aten.full.default([], 1, dtype=self.dtype, device=self.device)
    w = where(keep, w, aten.scalar_tensor.default(0, dtype=self.dtype, device=self.device))
    return aten.neg.default(aten.mul.Tensor(picked, w)), w, safe_t


@register(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    if self.dim() == 1:
        s, t = aten.unsqueeze.default(self, 0), aten.unsqueeze.default(target, 0)
        loss, w, _ = _nll_picked(s, t, weight, ignore_index)
        loss, w = aten.squeeze.dims(loss, [0]), aten.squeeze.dims(w, [0])
    else:
        loss, w, _ = _nll_picked(self, target, weight, ignore_index)
    if reduction == NONE:
        return loss, aten.full.default([], 0, dtype=self.dtype, device=self.device)
    total_weight = aten.sum.dim_IntList(aten.expand.default(w, list(loss.shape)), [], False)
    total = aten.sum.dim_IntList(loss, [], False)
    if reduction == MEAN:
        total = aten.div.Tensor(total, total_weight)
    return total, total_weight


@register(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    squeeze = self.dim() == 1
    s = aten.unsqueeze.default(self, 0) if squeeze else self
    t = aten.unsqueeze.default(target, 0) if squeeze else target
    chan = 1
    safe_t = where(aten.eq.Scalar(t, ignore_index), 0, t)
    keep = aten.ne.Scalar(t, ignore_index)
    w = (
        _take(weight, safe_t)
        if weight is not None
        else aten.full.default([], 1, dtype=s.dtype, device=s.device)
    )
    w = where(keep, w, aten.scalar_tensor.default(0, dtype=s.dtype, device=s.device))
    g = grad_output
    if reduction == MEAN:
        g = aten.div.Tensor(g, total_weight)
    elif reduction == NONE and squeeze:
        g = aten.unsqueeze.default(g, 0)
    vals = aten.neg.default(aten.mul.Tensor(w, g))
    # each row's target class takes -w*g, the others 0: a compare and a select (elementwise,
    # so it fuses into the softmax backward that reads it) rather than a scatter into zeros
    c = s.shape[chan]
    classes = aten.view.default(iota(c, s), [1, c] + [1] * (s.dim() - 2))
    hit = aten.eq.Tensor(classes, aten.unsqueeze.default(safe_t, chan))
    # ignored rows get 0 even when every row is ignored (then g is 0/0 under "mean", as in ATen)
    hit = aten.logical_and.default(hit, aten.unsqueeze.default(keep, chan))
    vals = aten.unsqueeze.default(aten.expand.default(vals, list(safe_t.shape)), chan)
    out = where(hit, vals, 0)
    return aten.squeeze.dims(out, [0]) if squeeze else out


@register(aten.multi_margin_loss.default)
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=MEAN):
    x = self if self.dim() > 1 else aten.view.default(self, [1, -1 if self.dim() else 1])
    t = target if target.dim() > 0 else aten.unsqueeze.default(target, 0)
    c = x.shape[1]
    xt = aten.gather.default(x, 1, aten.unsqueeze.default(t, 1))
    z = aten.clamp.default(aten.add.Tensor(aten.sub.Tensor(x, xt), margin), 0)
    if p == 2:
        z = aten.mul.Tensor(z, z)
    if weight is not None:
        z = aten.mul.Tensor(z, aten.unsqueeze.default(_take(weight, t), 1))
    not_target = aten.ne.Tensor(
        aten.unsqueeze.default(to_dtype(_iota_like(c, x), t.dtype), 0), aten.unsqueeze.default(t, 1)
    )
    z = where(not_target, z, 0)
    loss = aten.div.Tensor(aten.sum.dim_IntList(z, [1], False), c)
    if self.dim() <= 1 and reduction == NONE:
        loss = aten.squeeze.dims(loss, [0]) if self.dim() == 0 or target.dim() == 0 else loss
    return _reduce(loss, reduction)


def _iota_like(n, x):
    return aten.arange.start_step(0, n, 1, dtype=torch.int64, device=x.device)


def _take(vec, idx):
    """vec[idx] for a 1-d vec and an integer idx of any shape (index_select, not advanced indexing)."""
    flat = aten.index_select.default(vec, 0, aten.view.default(idx, [-1]))
    return aten.view.default(flat, list(idx.shape))
