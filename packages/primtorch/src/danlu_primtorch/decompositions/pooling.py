"""Pooling (max, average, adaptive) in 1-3 spatial dims, forward and backward.

Every pool is a windowed gather: for each spatial dim an index table ``idx[o, k]`` (output
position o, window offset k) and a validity mask; one ``index_select`` per dim reads all windows
as ``[..., O1, .., On, K1*..*Kn]`` and a reduction finishes it. Average pooling's backward scatter-adds the gradient
through the same tables; max pooling's gathers, per input position, the gradients of the few
windows it can lie in (a scatter when there are too many).
"""

from __future__ import annotations

import itertools
import math

import torch

from danlu_primtorch.decompositions._helpers import iota, to_dtype, where, zeros
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _tuple(v, n, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return max(o, 0)


class _Windows:
    """Index tables of a pooling over the trailing ``n`` dims of ``x``."""

    def __init__(self, x, idx, valid):
        self.x, self.idx, self.valid = x, idx, valid  # lists of [O_i, K_i] tensors
        self.n = len(idx)

    def _grid(self, tables):
        # table i reshaped to [.., O_i at 2i, K_i at 2i+1, ..] so the tables broadcast together
        out = []
        for i, t in enumerate(tables):
            shape = [1] * (2 * self.n)
            shape[2 * i], shape[2 * i + 1] = t.shape
            out.append(aten.view.default(t, shape))
        return out

    def _to_out_k(self, t):
        # [.., O1, K1, .., On, Kn] -> [.., O1..On, K1*..*Kn]
        lead = t.dim() - 2 * self.n
        perm = (
            list(range(lead))
            + [lead + 2 * i for i in range(self.n)]
            + [lead + 2 * i + 1 for i in range(self.n)]
        )
        t = aten.permute.default(t, perm)
        k = 1
        for i in range(self.n):
            k *= t.shape[lead + self.n + i]
        shape = list(t.shape[: lead + self.n]) + [k]
        return aten.view.default(
            aten.clone.default(t, memory_format=torch.contiguous_format), shape
        )

    def read(self, fill):
        # a separable gather: one index_select per spatial dim (with the flattened [O_i, K_i]
        # table), so no multi-dimensional advanced indexing is needed
        lead = self.x.dim() - self.n
        out = self.x
        for i, (idx, v) in enumerate(zip(self.idx, self.valid)):
            d = lead + 2 * i
            o, k = idx.shape
            out = aten.index_select.default(out, d, aten.view.default(where(v, idx, 0), [o * k]))
            shape = list(out.shape)
            out = aten.view.default(out, shape[:d] + [o, k] + shape[d + 1 :])
        fill_t = aten.scalar_tensor.default(fill, dtype=self.x.dtype, device=self.x.device)
        return self._to_out_k(where(self._valid_grid(), out, fill_t))

    def _valid_grid(self):
        ok = None
        for g in self._grid(self.valid):
            ok = g if ok is None else aten.logical_and.default(ok, g)
        return ok

    def valid_count(self):
        """[O1..On, 1]: how many window elements fall inside the input."""
        per = self._to_out_k(to_dtype(self._valid_grid(), torch.int64))
        return aten.sum.dim_IntList(per, [-1], True)

    def flat_index(self):
        """[O1..On, K] index of each window element into the flattened spatial plane."""
        sizes = self.x.shape[self.x.dim() - self.n :]
        flat, mult = None, 1
        grid = self._grid([where(v, i, 0) for i, v in zip(self.idx, self.valid)])
        for i in reversed(range(self.n)):
            term = aten.mul.Tensor(grid[i], mult)
            flat = term if flat is None else aten.add.Tensor(flat, term)
            mult *= sizes[i]
        return self._to_out_k(aten.expand.default(flat, _bshape(grid)))


def _bshape(tensors):
    return list(torch.broadcast_shapes(*[t.shape for t in tensors]))


def _sliding(x, n, kernel, stride, padding, dilation, ceil_mode):
    sizes = x.shape[x.dim() - n :]
    idx, valid = [], []
    for i in range(n):
        o = _out_size(sizes[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
        start = aten.unsqueeze.default(iota(o, x, start=-padding[i], step=stride[i]), 1)
        off = aten.unsqueeze.default(iota(kernel[i], x, step=dilation[i]), 0)
        pos = aten.add.Tensor(start, off)
        idx.append(pos)
        valid.append(
            aten.logical_and.default(aten.ge.Scalar(pos, 0), aten.lt.Scalar(pos, sizes[i]))
        )
    return _Windows(x, idx, valid)


def _lowest(dtype):
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def _max_pool(x, n, kernel_size, stride, padding, dilation, ceil_mode):
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n, k)
    p = _tuple(padding, n)
    d = _tuple(dilation, n)
    w = _sliding(x, n, k, s, p, d, ceil_mode)
    vals = w.read(_lowest(x.dtype))
    out = aten.amax.default(vals, [-1], False)
    arg = aten.argmax.default(vals, -1, True)
    flat = w.flat_index()
    flat = aten.expand.default(flat, list(vals.shape[: vals.dim() - flat.dim()]) + list(flat.shape))
    indices = aten.squeeze.dims(aten.gather.default(flat, -1, arg), [-1])
    return out, indices


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode)


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _scatter_to_input(grad, indices, input, n):
    """grad_input[.., plane] += grad[.., out] at ``indices`` (flat plane positions)."""
    lead = list(input.shape[: input.dim() - n])
    plane = 1
    for s in input.shape[input.dim() - n :]:
        plane *= s
    m = 1
    for s in grad.shape[len(lead) :]:
        m *= s
    g = aten.view.default(
        aten.clone.default(grad, memory_format=torch.contiguous_format), lead + [m]
    )
    i = aten.expand.default(indices, list(grad.shape))
    i = aten.view.default(aten.clone.default(i, memory_format=torch.contiguous_format), lead + [m])
    out = aten.scatter_add.default(zeros(lead + [plane], grad), len(lead), i, g)
    return aten.view.default(out, list(input.shape))


# most windows one input position can fall in, summed over as gathers (a 3x3 stride-2 pool:
# 2x2 = 4); beyond it the backward scatters instead
_GATHER_MAX_WINDOWS = 16


def _gather_from_windows(grad, indices, input, n, s, p, counts):
    """grad_input at each input position: the sum of the gradients of the windows whose
    maximum it was. Input position h can only be in windows o = (h + p) // s - a for
    a < ``counts`` (per dim); each candidate gathers that window's gradient and index and
    counts where the index is h. One pointwise computation with no scatter (the result takes
    whatever layout its users want, no atomics, no zero-filled buffer), summed in float32 in
    ascending window order per dim, as eager's kernels do."""
    lead = input.dim() - n
    sizes = list(input.shape[lead:])
    outs = list(grad.shape[lead:])
    # per dim i and candidate a: the window index table [S_i], and where it exists shaped to
    # broadcast over the plane ([1, .., S_i, .., 1])
    tables = []
    for i in range(n):
        h = iota(sizes[i], input)
        base = aten.div.Tensor_mode(aten.add.Tensor(h, p[i]), s[i], rounding_mode="floor")
        shape = [1] * n
        shape[i] = sizes[i]
        per = []
        for a in reversed(range(counts[i])):  # ascending window index
            o = aten.sub.Tensor(base, a)
            ok = aten.logical_and.default(aten.ge.Scalar(o, 0), aten.lt.Scalar(o, outs[i]))
            per.append((where(ok, o, 0), aten.view.default(ok, shape)))
        tables.append(per)
    # flat plane position of each input position, [S_1, .., S_n]
    flat, mult = None, 1
    for i in reversed(range(n)):
        shape = [1] * n
        shape[i] = sizes[i]
        term = aten.view.default(aten.mul.Tensor(iota(sizes[i], input), mult), shape)
        flat = term if flat is None else aten.add.Tensor(flat, term)
        mult = mult * sizes[i]
    acc = torch.float32 if grad.dtype in (torch.float16, torch.bfloat16) else grad.dtype
    total = None
    for combo in itertools.product(*[range(c) for c in counts]):
        g, ix, ok = grad, indices, None
        for i, a in enumerate(combo):
            o, valid = tables[i][a]
            g = aten.index_select.default(g, lead + i, o)
            ix = aten.index_select.default(ix, lead + i, o)
            ok = valid if ok is None else aten.logical_and.default(ok, valid)
        hit = aten.logical_and.default(aten.eq.Tensor(ix, flat), ok)
        term = where(hit, to_dtype(g, acc), 0.0)
        total = term if total is None else aten.add.Tensor(total, term)
    return to_dtype(total, grad.dtype)


def _max_pool_backward(grad, input, kernel_size, stride, padding, dilation, indices, n):
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n, k)
    p = _tuple(padding, n)
    d = _tuple(dilation, n)
    # per dim: how many windows o*s - p + j*d (j < k) can hold one input position
    counts = [((k[i] - 1) * d[i]) // s[i] + 1 for i in range(n)]
    if math.prod(counts) > _GATHER_MAX_WINDOWS:
        out = _scatter_to_input(grad, indices, input, n)
    else:
        out = _gather_from_windows(grad, indices, input, n, s, p, counts)
    # eager lays the gradient out as the input is (channels-last in, channels-last out)
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(input.dim())
    if fmt is not None and not input.is_contiguous() and input.is_contiguous(memory_format=fmt):
        out = aten.clone.default(out, memory_format=fmt)
    return out


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(
    grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    return _max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, indices, 2)


@register(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(
    grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    return _max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, indices, 3)


def _avg_divisor(x, n, k, s, p, ceil_mode, count_include_pad, divisor_override, w):
    if divisor_override:
        return divisor_override
    if not count_include_pad:
        return w.valid_count()
    sizes = x.shape[x.dim() - n :]
    div = None
    for i in range(n):
        o = w.idx[i].shape[0]
        start = iota(o, x, start=-p[i], step=s[i])
        end = aten.clamp.default(aten.add.Tensor(start, k[i]), None, sizes[i] + p[i])
        span = aten.sub.Tensor(end, start)
        shape = [1] * n
        shape[i] = o
        span = aten.view.default(span, shape)
        div = span if div is None else aten.mul.Tensor(div, span)
    return aten.unsqueeze.default(div, -1)


def _avg_pool(x, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n, k)
    p = _tuple(padding, n)
    w = _sliding(x, n, k, s, p, [1] * n, ceil_mode)
    total = aten.sum.dim_IntList(w.read(0), [-1], True)
    div = _avg_divisor(x, n, k, s, p, ceil_mode, count_include_pad, divisor_override, w)
    if not x.dtype.is_floating_point:
        out = aten.div.Tensor_mode(total, div, rounding_mode="trunc")
    else:
        out = aten.div.Tensor(total, div)
    return aten.squeeze.dims(to_dtype(out, x.dtype), [-1])


@register(aten.avg_pool2d.default)
def avg_pool2d(
    self,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return _avg_pool(
        self, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


@register(aten.avg_pool3d.default)
def avg_pool3d(
    self,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return _avg_pool(
        self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _avg_pool_backward(
    grad_output, x, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n, k)
    p = _tuple(padding, n)
    w = _sliding(x, n, k, s, p, [1] * n, ceil_mode)
    div = _avg_divisor(x, n, k, s, p, ceil_mode, count_include_pad, divisor_override, w)
    g = aten.div.Tensor(aten.unsqueeze.default(grad_output, -1), div)
    valid = w._to_out_k(w._valid_grid())
    flat = w.flat_index()
    kk = flat.shape[-1]
    g = where(valid, aten.expand.default(g, list(grad_output.shape) + [kk]), 0)
    return _scatter_to_input(g, flat, x, n)


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    return _avg_pool_backward(
        grad_output,
        self,
        2,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


@register(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    return _avg_pool_backward(
        grad_output,
        self,
        3,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def _adaptive(x, n, output_size):
    sizes = x.shape[x.dim() - n :]
    out = _tuple(output_size, n)
    idx, valid = [], []
    for i in range(n):
        size, o = sizes[i], out[i]
        starts = [(j * size) // o for j in range(o)]
        ends = [-(-((j + 1) * size) // o) for j in range(o)]
        kmax = max((e - b for b, e in zip(starts, ends)), default=0)
        st = aten.unsqueeze.default(
            aten.floor_divide.default(aten.mul.Tensor(iota(o, x), size), o), 1
        )
        en = aten.unsqueeze.default(
            aten.neg.default(
                aten.floor_divide.default(aten.mul.Tensor(iota(o, x, start=1), -size), o)
            ),
            1,
        )
        pos = aten.add.Tensor(st, aten.unsqueeze.default(iota(kmax, x), 0))
        idx.append(pos)
        valid.append(aten.lt.Tensor(pos, en))
    return _Windows(x, idx, valid)


@register(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(self, output_size):
    return _adaptive_avg(self, 2, output_size)


@register(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(self, output_size):
    return _adaptive_avg(self, 3, output_size)


def _adaptive_avg(x, n, output_size):
    w = _adaptive(x, n, output_size)
    total = aten.sum.dim_IntList(w.read(0), [-1], False)
    return aten.div.Tensor(total, aten.squeeze.dims(w.valid_count(), [-1]))


def _adaptive_avg_backward(grad_output, x, n):
    w = _adaptive(x, n, list(grad_output.shape[grad_output.dim() - n :]))
    cnt = w.valid_count()
    g = aten.div.Tensor(aten.unsqueeze.default(grad_output, -1), cnt)
    valid = w._to_out_k(w._valid_grid())
    flat = w.flat_index()
    g = where(valid, aten.expand.default(g, list(grad_output.shape) + [flat.shape[-1]]), 0)
    return _scatter_to_input(g, flat, x, n)


@register(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(grad_output, self):
    return _adaptive_avg_backward(grad_output, self, 2)


@register(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(grad_output, self):
    return _adaptive_avg_backward(grad_output, self, 3)


def _adaptive_max(x, n, output_size):
    w = _adaptive(x, n, output_size)
    vals = w.read(_lowest(x.dtype))
    out = aten.amax.default(vals, [-1], False)
    arg = aten.argmax.default(vals, -1, True)
    flat = w.flat_index()
    flat = aten.expand.default(flat, list(vals.shape[: vals.dim() - flat.dim()]) + list(flat.shape))
    return out, aten.squeeze.dims(aten.gather.default(flat, -1, arg), [-1])


@register(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(self, 2, output_size)


@register(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(self, 3, output_size)


@register(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad_output, self, indices):
    return _scatter_to_input(grad_output, indices, self, 2)


@register(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(grad_output, self, indices):
    return _scatter_to_input(grad_output, indices, self, 3)


@register(aten.im2col.default)
def im2col(self, kernel_size, dilation, padding, stride):
    batched = self.dim() == 4
    x = self if batched else aten.unsqueeze.default(self, 0)
    w = _sliding(
        x,
        2,
        _tuple(kernel_size, 2),
        _tuple(stride, 2),
        _tuple(padding, 2),
        _tuple(dilation, 2),
        False,
    )
    vals = w.read(0)  # [N, C, oH, oW, kH*kW]
    n, c, oh, ow, kk = vals.shape
    cols = aten.permute.default(vals, [0, 1, 4, 2, 3])
    out = aten.view.default(
        aten.clone.default(cols, memory_format=torch.contiguous_format), [n, c * kk, oh * ow]
    )
    return out if batched else aten.squeeze.dims(out, [0])


@register(aten.col2im.default)
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    batched = self.dim() == 3
    cols = self if batched else aten.unsqueeze.default(self, 0)
    k, d, p, s = _tuple(kernel_size, 2), _tuple(dilation, 2), _tuple(padding, 2), _tuple(stride, 2)
    n = cols.shape[0]
    c = cols.shape[1] // (k[0] * k[1])
    like = zeros([n, c] + list(output_size), cols)
    w = _sliding(like, 2, k, s, p, d, False)
    oh, ow = w.idx[0].shape[0], w.idx[1].shape[0]
    g = aten.view.default(cols, [n, c, k[0] * k[1], oh, ow])
    g = aten.permute.default(g, [0, 1, 3, 4, 2])  # [N, C, oH, oW, K] like the window reads
    valid = w._to_out_k(w._valid_grid())
    g = where(valid, g, 0)
    out = _scatter_to_input(g, w.flat_index(), like, 2)
    return out if batched else aten.squeeze.dims(out, [0])
