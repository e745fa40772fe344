"""Upsampling (nearest, nearest-exact, linear/bilinear/trilinear, bicubic) and padding modes.

All are separable: each spatial dim is resampled in turn with an index table (``index_select``)
and, for the interpolating modes, per-position weights; backward ops run the same tables in
reverse with ``index_add``. Source positions follow ATen's rules (float32 index arithmetic,
``align_corners``, explicit scales).
"""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions._helpers import iota, opmath, to_dtype, where, zeros
from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _scale(in_size, out_size, align_corners, scale):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size if out_size else 0.0


def _nearest_index(x, in_size, out_size, scale, exact):
    s = (
        1.0 / scale
        if scale is not None and scale > 0
        else (in_size / out_size if out_size else 0.0)
    )
    pos = iota(out_size, x, dtype=torch.float32)
    if exact:
        pos = aten.add.Tensor(pos, 0.5)
    src = to_dtype(aten.floor.default(aten.mul.Tensor(pos, s)), torch.int64)
    return aten.clamp.default(src, None, max(in_size - 1, 0))


def _spatial(x, n):
    return list(range(x.dim() - n, x.dim()))


def _nearest(x, output_size, scales, exact):
    n = len(output_size)
    out = x
    for d, o, s in zip(_spatial(x, n), output_size, scales):
        out = aten.index_select.default(out, d, _nearest_index(x, x.shape[d], o, s, exact))
    return out


def _nearest_backward(grad, input_size, output_size, scales, exact):
    n = len(output_size)
    g = grad
    dims = list(range(len(input_size) - n, len(input_size)))
    for d, o, s in reversed(list(zip(dims, output_size, scales))):
        shape = list(g.shape)
        shape[d] = input_size[d]
        idx = _nearest_index(grad, input_size[d], o, s, exact)
        g = aten.index_add.default(zeros(shape, g), d, idx, g)
    return g


def _reg_nearest(op, bw_op, n, exact):
    def fwd(self, output_size, *scales):
        return _nearest(self, output_size, list(scales) if scales else [None] * n, exact)

    def bwd(grad_output, output_size, input_size, *scales):
        return _nearest_backward(
            grad_output, input_size, output_size, list(scales) if scales else [None] * n, exact
        )

    register(op)(fwd)
    register(bw_op)(bwd)


_reg_nearest(aten.upsample_nearest1d.default, aten.upsample_nearest1d_backward.default, 1, False)
_reg_nearest(aten.upsample_nearest2d.default, aten.upsample_nearest2d_backward.default, 2, False)
_reg_nearest(aten.upsample_nearest3d.default, aten.upsample_nearest3d_backward.default, 3, False)
_reg_nearest(
    aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact1d_backward.default, 1, True
)
_reg_nearest(
    aten._upsample_nearest_exact2d.default, aten._upsample_nearest_exact2d_backward.default, 2, True
)
_reg_nearest(
    aten._upsample_nearest_exact3d.default, aten._upsample_nearest_exact3d_backward.default, 3, True
)


def _pos_dtype(x):
    # ATen interpolates positions in the op-math type: double for double inputs, else float
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _linear_taps(x, in_size, out_size, align_corners, scale):
    s = _scale(in_size, out_size, align_corners, scale)
    pos = iota(out_size, x, dtype=_pos_dtype(x))
    if align_corners:
        src = aten.mul.Tensor(pos, s)
    else:
        src = aten.clamp.default(
            aten.sub.Tensor(aten.mul.Tensor(aten.add.Tensor(pos, 0.5), s), 0.5), 0.0
        )
    i0 = aten.clamp.default(
        to_dtype(aten.floor.default(src), torch.int64), None, max(in_size - 1, 0)
    )
    i1 = aten.clamp.default(aten.add.Tensor(i0, 1), None, max(in_size - 1, 0))
    lam = aten.sub.Tensor(src, to_dtype(i0, src.dtype))
    return i0, i1, lam


def _bshape(ndim, d, n):
    shape = [1] * ndim
    shape[d] = n
    return shape


def _linear(x, output_size, align_corners, scales):
    n = len(output_size)
    compute = opmath(x.dtype)
    out = to_dtype(x, compute)
    for d, o, s in zip(_spatial(x, n), output_size, scales):
        i0, i1, lam = _linear_taps(x, x.shape[d], o, align_corners, s)
        lam = aten.view.default(to_dtype(lam, compute), _bshape(x.dim(), d, o))
        a = aten.index_select.default(out, d, i0)
        b = aten.index_select.default(out, d, i1)
        out = aten.add.Tensor(aten.mul.Tensor(a, aten.rsub.Scalar(lam, 1)), aten.mul.Tensor(b, lam))
    return to_dtype(out, x.dtype)


def _linear_backward(grad, input_size, output_size, align_corners, scales):
    n = len(output_size)
    compute = opmath(grad.dtype)
    g = to_dtype(grad, compute)
    dims = list(range(len(input_size) - n, len(input_size)))
    for d, o, s in reversed(list(zip(dims, output_size, scales))):
        i0, i1, lam = _linear_taps(grad, input_size[d], o, align_corners, s)
        lam = aten.view.default(to_dtype(lam, compute), _bshape(g.dim(), d, o))
        shape = list(g.shape)
        shape[d] = input_size[d]
        acc = aten.index_add.default(
            zeros(shape, g), d, i0, aten.mul.Tensor(g, aten.rsub.Scalar(lam, 1))
        )
        g = aten.index_add.default(acc, d, i1, aten.mul.Tensor(g, lam))
    return to_dtype(g, grad.dtype)


def _reg_linear(op, bw_op, n):
    def fwd(self, output_size, align_corners, *scales):
        return _linear(self, output_size, align_corners, list(scales) if scales else [None] * n)

    def bwd(grad_output, output_size, input_size, align_corners, *scales):
        return _linear_backward(
            grad_output,
            input_size,
            output_size,
            align_corners,
            list(scales) if scales else [None] * n,
        )

    register(op)(fwd)
    register(bw_op)(bwd)


_reg_linear(aten.upsample_linear1d.default, aten.upsample_linear1d_backward.default, 1)
_reg_linear(aten.upsample_bilinear2d.default, aten.upsample_bilinear2d_backward.default, 2)
_reg_linear(aten.upsample_trilinear3d.default, aten.upsample_trilinear3d_backward.default, 3)


def _cubic_weights(t, a=-0.75):
    # ATen's cubic convolution coefficients for the taps at offsets -1, 0, 1, 2
    def near(x):  # |x| <= 1
        return aten.add.Tensor(
            aten.mul.Tensor(
                aten.mul.Tensor(aten.sub.Tensor(aten.mul.Tensor(x, a + 2), a + 3), x), x
            ),
            1,
        )

    def far(x):  # 1 < |x| < 2
        inner = aten.add.Tensor(
            aten.mul.Tensor(aten.sub.Tensor(aten.mul.Tensor(x, a), 5 * a), x), 8 * a
        )
        return aten.sub.Tensor(aten.mul.Tensor(inner, x), 4 * a)

    return [
        far(aten.add.Tensor(t, 1)),
        near(t),
        near(aten.rsub.Scalar(t, 1)),
        far(aten.rsub.Scalar(t, 2)),
    ]


def _cubic_taps(x, in_size, out_size, align_corners, scale):
    s = _scale(in_size, out_size, align_corners, scale)
    pos = iota(out_size, x, dtype=_pos_dtype(x))
    src = (
        aten.mul.Tensor(pos, s)
        if align_corners
        else aten.sub.Tensor(aten.mul.Tensor(aten.add.Tensor(pos, 0.5), s), 0.5)
    )
    fl = aten.floor.default(src)
    t = aten.sub.Tensor(src, fl)
    base = to_dtype(fl, torch.int64)
    idx = [
        aten.clamp.default(aten.add.Tensor(base, k), 0, max(in_size - 1, 0)) for k in (-1, 0, 1, 2)
    ]
    return idx, _cubic_weights(t)


@register(aten.upsample_bicubic2d.default)
def upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    compute = opmath(self.dtype)
    out = to_dtype(self, compute)
    for d, o, s in zip(_spatial(self, 2), output_size, [scales_h, scales_w]):
        idx, ws = _cubic_taps(self, self.shape[d], o, align_corners, s)
        acc = None
        for i, w in zip(idx, ws):
            term = aten.mul.Tensor(
                aten.index_select.default(out, d, i),
                aten.view.default(to_dtype(w, compute), _bshape(self.dim(), d, o)),
            )
            acc = term if acc is None else aten.add.Tensor(acc, term)
        out = acc
    return to_dtype(out, self.dtype)


@register(aten.upsample_bicubic2d_backward.default)
def upsample_bicubic2d_backward(
    grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None
):
    compute = opmath(grad_output.dtype)
    g = to_dtype(grad_output, compute)
    dims = [len(input_size) - 2, len(input_size) - 1]
    for d, o, s in reversed(list(zip(dims, output_size, [scales_h, scales_w]))):
        idx, ws = _cubic_taps(g, input_size[d], o, align_corners, s)
        shape = list(g.shape)
        shape[d] = input_size[d]
        acc = zeros(shape, g)
        for i, w in zip(idx, ws):
            acc = aten.index_add.default(
                acc,
                d,
                i,
                aten.mul.Tensor(g, aten.view.default(to_dtype(w, compute), _bshape(g.dim(), d, o))),
            )
        g = acc
    return to_dtype(g, grad_output.dtype)


# --- padding modes other than constant (constant_pad_nd is canonical)
def _pad_index(x, size, before, after, mode):
    i = iota(size + before + after, x, start=-before)
    if mode == "replicate":
        return aten.clamp.default(i, 0, size - 1)
    if mode == "circular":
        return aten.remainder.Tensor(
            i, aten.scalar_tensor.default(size, dtype=torch.int64, device=x.device)
        )
    # reflect: mirror about the first and last elements (not repeating them)
    i = aten.abs.default(i)
    return aten.sub.Tensor(size - 1, aten.abs.default(aten.sub.Tensor(i, size - 1)))


def _pad_dims(x, padding):
    n = len(padding) // 2
    # padding lists (left, right) pairs starting from the last dim
    return [(x.dim() - 1 - k, padding[2 * k], padding[2 * k + 1]) for k in range(n)]


def _pad(self, padding, mode):
    out = self
    for d, lo, hi in _pad_dims(self, padding):
        size = self.shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, "
                f"but got: padding ({lo}, {hi}) at dimension {d} of input {list(self.shape)}"
            )
        out = aten.index_select.default(out, d, _pad_index(self, size, lo, hi, mode))
    return out


def _pad_backward(grad_output, self, padding, mode):
    g = grad_output
    for d, lo, hi in reversed(_pad_dims(self, padding)):
        shape = list(g.shape)
        shape[d] = self.shape[d]
        g = aten.index_add.default(
            zeros(shape, g), d, _pad_index(self, self.shape[d], lo, hi, mode), g
        )
    return g


for _n in (1, 2, 3):
    for _mode, _name in (("reflect", "reflection"), ("replicate", "replication")):
        register(getattr(aten, f"{_name}_pad{_n}d").default)(
            lambda self, padding, _m=_mode: _pad(self, padding, _m)
        )
        register(getattr(aten, f"{_name}_pad{_n}d_backward").default)(
            lambda grad_output, self, padding, _m=_mode: _pad_backward(
                grad_output, self, padding, _m
            )
        )


# --- grid sampling (bilinear / nearest; zeros, border and reflection padding)
def _unnormalize(coord, size, align_corners):
    if align_corners:
        return aten.mul.Tensor(aten.add.Tensor(coord, 1), (size - 1) / 2)
    return aten.div.Tensor(aten.sub.Tensor(aten.mul.Tensor(aten.add.Tensor(coord, 1), size), 1), 2)


def _reflect(coord, twice_low, twice_high):
    if twice_low == twice_high:
        return aten.mul.Tensor(coord, 0)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = aten.abs.default(aten.sub.Tensor(coord, lo))
    extra = aten.fmod.Tensor(c, aten.scalar_tensor.default(span, dtype=c.dtype, device=c.device))
    flips = aten.floor.default(aten.div.Tensor(c, span))
    even = aten.eq.Scalar(
        aten.remainder.Tensor(
            flips, aten.scalar_tensor.default(2.0, dtype=c.dtype, device=c.device)
        ),
        0,
    )
    return where(
        even, aten.add.Tensor(extra, lo), aten.add.Tensor(aten.rsub.Scalar(extra, span), lo)
    )


def _source_coord(coord, size, padding_mode, align_corners):
    c = _unnormalize(coord, size, align_corners)
    if padding_mode == 1:  # border
        c = aten.clamp.default(c, 0, size - 1)
    elif padding_mode == 2:  # reflection
        if align_corners:
            c = _reflect(c, 0, 2 * (size - 1))
        else:
            c = _reflect(c, -1, 2 * size - 1)
        c = aten.clamp.default(c, 0, size - 1)
    return c


@register(aten.grid_sampler_2d.default)
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in (0, 1) or input.dim() != 4:
        return NotImplemented  # bicubic stays an ATen op
    n, c, h, w = input.shape
    gx = _source_coord(aten.select.int(grid, -1, 0), w, padding_mode, align_corners)
    gy = _source_coord(aten.select.int(grid, -1, 1), h, padding_mode, align_corners)
    batch = aten.view.default(iota(n, input), [n, 1, 1])
    rows = aten.permute.default(input, [0, 2, 3, 1])
    rows = aten.clone.default(rows, memory_format=torch.contiguous_format)
    rows = aten.view.default(rows, [n * h * w, c])

    def tap(iy, ix):
        valid = aten.logical_and.default(
            aten.logical_and.default(aten.ge.Scalar(ix, 0), aten.lt.Scalar(ix, w)),
            aten.logical_and.default(aten.ge.Scalar(iy, 0), aten.lt.Scalar(iy, h)),
        )
        sx = where(valid, ix, 0)
        sy = where(valid, iy, 0)
        # rows of the [N*H*W, C] view of the input, read with one index_select
        flat = aten.add.Tensor(
            aten.mul.Tensor(aten.add.Tensor(aten.mul.Tensor(batch, h), sy), w), sx
        )
        ho, wo = flat.shape[1], flat.shape[2]
        vals = aten.index_select.default(rows, 0, aten.view.default(flat, [-1]))
        vals = aten.view.default(vals, [n, ho, wo, c])  # [N, Ho, Wo, C]
        vals = where(aten.unsqueeze.default(valid, -1), vals, 0)
        return aten.permute.default(vals, [0, 3, 1, 2])

    if interpolation_mode == 1:  # nearest, ties to even as nearbyint
        ix = to_dtype(aten.round.default(gx), torch.int64)
        iy = to_dtype(aten.round.default(gy), torch.int64)
        return tap(iy, ix)
    x0f, y0f = aten.floor.default(gx), aten.floor.default(gy)
    x0, y0 = to_dtype(x0f, torch.int64), to_dtype(y0f, torch.int64)
    x1, y1 = aten.add.Tensor(x0, 1), aten.add.Tensor(y0, 1)
    wx1 = aten.sub.Tensor(gx, x0f)
    wy1 = aten.sub.Tensor(gy, y0f)
    wx0, wy0 = aten.rsub.Scalar(wx1, 1), aten.rsub.Scalar(wy1, 1)

    def wt(a, b):
        return aten.unsqueeze.default(aten.mul.Tensor(a, b), 1)

    out = aten.mul.Tensor(tap(y0, x0), wt(wy0, wx0))
    out = aten.add.Tensor(out, aten.mul.Tensor(tap(y0, x1), wt(wy0, wx1)))
    out = aten.add.Tensor(out, aten.mul.Tensor(tap(y1, x0), wt(wy1, wx0)))
    return aten.add.Tensor(out, aten.mul.Tensor(tap(y1, x1), wt(wy1, wx1)))
