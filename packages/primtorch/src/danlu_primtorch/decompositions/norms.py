"""Layer, group, batch and RMS normalisation, forward and backward.

Statistics are computed in the op-math dtype (float32 for half inputs) with the biased variance
and ``rsqrt(var + eps)``, as ATen's kernels do; the saved ``mean``/``rstd`` outputs have the
shapes ATen gives them, so eager backward kernels can consume ours and vice versa.
"""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import numel_of, opmath, to_dtype
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _biased_var_mean(x, dims):
    # one op, so that a backend keeping var_mean gets both statistics from one pass (a
    # separate sum for the mean was a second reduction of the same values); this table
    # decomposes it into var and sum / n
    return aten.var_mean.correction(x, dims, correction=0, keepdim=True)


@register(aten.native_layer_norm.default)
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    k = len(normalized_shape)
    axis = input.dim() - k
    if list(input.shape[axis:]) != list(normalized_shape):
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}"
        )
    compute = opmath(input.dtype)
    x = to_dtype(input, compute)
    dims = list(range(axis, input.dim()))
    if input.numel() == 0:
        stat_shape = list(input.shape[:axis]) + [1] * k
        empty = aten.full.default(stat_shape, 0, dtype=compute, device=input.device)
        return aten.clone.default(input), empty, empty
    var, mean = _biased_var_mean(x, dims)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    if bias is not None:
        out = aten.add.Tensor(out, bias)
    out = to_dtype(out, input.dtype)
    if not out.is_contiguous():
        # ATen's kernels write a contiguous result whatever the input's strides; matmuls after
        # a layer norm over a permuted input (ConvNeXt's NHWC blocks) fold into one mm only then
        out = aten.clone.default(out, memory_format=torch.contiguous_format)
    return out, mean, rstd


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(
    grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask
):
    k = len(normalized_shape)
    axis = input.dim() - k
    inner = list(range(axis, input.dim()))
    outer = list(range(axis))
    n = numel_of(input, inner)
    compute = opmath(input.dtype)
    x, g = to_dtype(input, compute), to_dtype(grad_out, compute)
    xhat = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    gx = gw = gb = None
    if output_mask[0]:
        gxhat = aten.mul.Tensor(g, weight) if weight is not None else g
        if n == 0:
            gx = aten.full.default(list(input.shape), 0, dtype=input.dtype, device=input.device)
        else:
            a = aten.mul.Tensor(gxhat, n)
            b = aten.sum.dim_IntList(gxhat, inner, True)
            c = aten.mul.Tensor(
                xhat, aten.sum.dim_IntList(aten.mul.Tensor(gxhat, xhat), inner, True)
            )
            gx = aten.mul.Tensor(
                aten.div.Tensor(rstd, n), aten.sub.Tensor(aten.sub.Tensor(a, b), c)
            )
            gx = to_dtype(gx, input.dtype)
    if output_mask[1] and weight is not None:
        gw = (
            aten.sum.dim_IntList(aten.mul.Tensor(g, xhat), outer, False)
            if outer
            else aten.mul.Tensor(g, xhat)
        )
        gw = to_dtype(gw, weight.dtype)
    if output_mask[2] and bias is not None:
        gb = aten.sum.dim_IntList(g, outer, False) if outer else aten.clone.default(g)
        gb = to_dtype(gb, bias.dtype)
    return gx, gw, gb


@register(aten.native_group_norm.default)
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    compute = opmath(input.dtype)
    x = (
        aten.view.default(to_dtype(input, compute), [N, group, -1])
        if input.numel()
        else to_dtype(input, compute)
    )
    if input.numel() == 0:
        empty = aten.full.default([N, group], 0, dtype=compute, device=input.device)
        return aten.clone.default(input), empty, empty
    var, mean = _biased_var_mean(x, [2])
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = aten.view.default(aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd), list(input.shape))
    bshape = [1, C] + [1] * (input.dim() - 2)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, bshape))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, bshape))
    return (
        to_dtype(out, input.dtype),
        aten.view.default(mean, [N, group]),
        aten.view.default(rstd, [N, group]),
    )


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    compute = opmath(input.dtype)
    cpg = C // group
    x = aten.view.default(to_dtype(input, compute), [N, group, cpg, HxW])
    g = aten.view.default(to_dtype(grad_out, compute), [N, group, cpg, HxW])
    m = aten.view.default(mean, [N, group, 1, 1])
    r = aten.view.default(rstd, [N, group, 1, 1])
    xhat = aten.mul.Tensor(aten.sub.Tensor(x, m), r)
    gx = gw = gb = None
    if output_mask[0]:
        gxhat = g
        if weight is not None:
            gxhat = aten.mul.Tensor(g, aten.view.default(weight, [1, group, cpg, 1]))
        n = cpg * HxW
        a = aten.mul.Tensor(gxhat, n)
        b = aten.sum.dim_IntList(gxhat, [2, 3], True)
        c = aten.mul.Tensor(xhat, aten.sum.dim_IntList(aten.mul.Tensor(gxhat, xhat), [2, 3], True))
        gx = aten.mul.Tensor(aten.div.Tensor(r, n), aten.sub.Tensor(aten.sub.Tensor(a, b), c))
        gx = to_dtype(aten.view.default(gx, list(input.shape)), input.dtype)
    if output_mask[1]:
        gw = aten.view.default(aten.sum.dim_IntList(aten.mul.Tensor(g, xhat), [0, 3], False), [C])
        gw = to_dtype(gw, input.dtype)
    if output_mask[2]:
        gb = to_dtype(aten.view.default(aten.sum.dim_IntList(g, [0, 3], False), [C]), input.dtype)
    return gx, gw, gb


def _bn_shape(input):
    return [1, input.shape[1]] + [1] * (input.dim() - 2)


def _batch_norm(
    input, weight, bias, running_mean, running_var, training, momentum, eps, functional
):
    compute = opmath(input.dtype)
    x = to_dtype(input, compute)
    dims = [0] + list(range(2, input.dim()))
    shape = _bn_shape(input)
    new_rm = new_rv = None
    if training:
        var, mean = _biased_var_mean(x, dims)
        rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
        save_mean = aten.view.default(mean, [input.shape[1]])
        save_rstd = aten.view.default(rstd, [input.shape[1]])
        if running_mean is not None:
            n = numel_of(input, dims)
            unbiased = aten.mul.Tensor(aten.view.default(var, [-1]), n / max(n - 1, 1))
            new_rm = aten.add.Tensor(
                aten.mul.Tensor(running_mean, 1 - momentum), aten.mul.Tensor(save_mean, momentum)
            )
            new_rv = aten.add.Tensor(
                aten.mul.Tensor(running_var, 1 - momentum), aten.mul.Tensor(unbiased, momentum)
            )
            new_rm, new_rv = (
                to_dtype(new_rm, running_mean.dtype),
                to_dtype(new_rv, running_var.dtype),
            )
    else:
        mean = aten.view.default(to_dtype(running_mean, compute), shape)
        rstd = aten.rsqrt.default(
            aten.add.Tensor(aten.view.default(to_dtype(running_var, compute), shape), eps)
        )
        # eval mode saves nothing: ATen returns empty statistics
        save_mean = aten.full.default([0], 0, dtype=compute, device=input.device)
        save_rstd = aten.full.default([0], 0, dtype=compute, device=input.device)
    out = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, shape))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, shape))
    out = to_dtype(out, input.dtype)
    if functional:
        return out, save_mean, save_rstd, new_rm, new_rv
    if new_rm is not None:
        # the running statistics are updated in place, as ATen's op does: the one mutation
        # this table emits (a functionalising tracer turns it into an output)
        aten.copy_.default(running_mean, new_rm)
        aten.copy_.default(running_var, new_rv)
    return out, save_mean, save_rstd


@register(aten.native_batch_norm.default)
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return _batch_norm(
        input, weight, bias, running_mean, running_var, training, momentum, eps, False
    )


@register(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_legit_functional(
    input, weight, bias, running_mean, running_var, training, momentum, eps
):
    out, m, r, rm, rv = _batch_norm(
        input, weight, bias, running_mean, running_var, training, momentum, eps, True
    )
    if rm is None:
        rm, rv = aten.clone.default(running_mean), aten.clone.default(running_var)
    return out, m, r, rm, rv


@register(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_legit_no_training(
    input, weight, bias, running_mean, running_var, momentum, eps
):
    return _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, False)


@register(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):
    return _batch_norm(input, weight, bias, None, None, training, momentum, eps, False)


@register(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(
    grad_out,
    input,
    weight,
    running_mean,
    running_var,
    save_mean,
    save_invstd,
    train,
    eps,
    output_mask,
):
    compute = opmath(input.dtype)
    x, g = to_dtype(input, compute), to_dtype(grad_out, compute)
    dims = [0] + list(range(2, input.dim()))
    shape = _bn_shape(input)
    n = numel_of(input, dims)
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean = running_mean
        invstd = aten.rsqrt.default(aten.add.Tensor(running_var, eps))
    mean = aten.view.default(to_dtype(mean, compute), shape)
    invstd = aten.view.default(to_dtype(invstd, compute), shape)
    xhat = aten.mul.Tensor(aten.sub.Tensor(x, mean), invstd)
    sum_g = aten.sum.dim_IntList(g, dims, True)
    sum_gx = aten.sum.dim_IntList(aten.mul.Tensor(g, xhat), dims, True)
    w = aten.view.default(to_dtype(weight, compute), shape) if weight is not None else None
    gx = gw = gb = None
    if output_mask[0]:
        scale = aten.mul.Tensor(invstd, w) if w is not None else invstd
        if train:
            inner = aten.sub.Tensor(
                aten.sub.Tensor(g, aten.div.Tensor(sum_g, n)),
                aten.mul.Tensor(xhat, aten.div.Tensor(sum_gx, n)),
            )
            gx = aten.mul.Tensor(inner, scale)
        else:
            gx = aten.mul.Tensor(g, scale)
        gx = to_dtype(gx, input.dtype)
    if output_mask[1]:
        gw = aten.view.default(sum_gx, [-1])
        gw = to_dtype(gw, weight.dtype if weight is not None else input.dtype)
    if output_mask[2]:
        gb = to_dtype(
            aten.view.default(sum_g, [-1]), weight.dtype if weight is not None else input.dtype
        )
    return gx, gw, gb


@register(aten.batch_norm_backward.default)
def batch_norm_backward(
    grad_out,
    input,
    weight,
    running_mean,
    running_var,
    save_mean,
    save_var,
    update,
    eps,
    output_mask,
    reserve,
):
    return native_batch_norm_backward(
        grad_out,
        input,
        weight,
        running_mean,
        running_var,
        save_mean,
        save_var,
        update,
        eps,
        output_mask,
    )


@register(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update_functional(
    input, weight, bias, running_mean, running_var, momentum, eps
):
    out, m, r, rm, rv = _batch_norm(
        input, weight, bias, running_mean, running_var, True, momentum, eps, True
    )
    reserve = aten.full.default([0], 0, dtype=torch.uint8, device=input.device)
    return out, m, r, reserve, rm, rv


@register(aten._batch_norm_no_update.default)
def batch_norm_no_update(input, weight, bias, running_mean, running_var, momentum, eps):
    out, m, r = _batch_norm(
        input, weight, bias, running_mean, running_var, False, momentum, eps, False
    )
    reserve = aten.full.default([0], 0, dtype=torch.uint8, device=input.device)
    return out, m, r, reserve
