"""Views: permute, expand, slice, select, reshape... as index rewrites, never copies."""

from __future__ import annotations

import sympy
import torch

from danlu_inductor.ir.layout import FixedLayout
from danlu_inductor.ir.nodes import ReinterpretView, StorageBox, View, realize_input
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import (
    DynamicShapeUnsupported,
    FloorDiv,
    IMod,
    as_expr,
    as_exprs,
    hint,
    is_static,
    product,
    same,
    same_sizes,
    to_int,
)
from danlu_inductor.lowering.registry import NotLowered, aten, normalize_dim, register


def view_of(x, size, reindex):
    return View(x, size, reindex)


@register(aten.permute.default)
def permute(x, dims):
    size = x.get_size()
    dims = [normalize_dim(d, len(size)) for d in dims]
    new_size = [size[d] for d in dims]

    def reindex(index):
        old = [None] * len(dims)
        for i, d in enumerate(dims):
            old[d] = index[i]
        return old

    return view_of(x, new_size, reindex)


@register(aten.t.default)
def t(x):
    n = len(x.get_size())
    return x if n < 2 else permute(x, [1, 0])


@register(aten.transpose.int)
def transpose(x, d0, d1):
    n = len(x.get_size())
    if n == 0:
        return x
    d0, d1 = normalize_dim(d0, n), normalize_dim(d1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims)


@register(aten.expand.default)
def expand(x, sizes, implicit=False):
    old = x.get_size()
    sizes = list(sizes)
    offset = len(sizes) - len(old)
    new = []
    for i, s in enumerate(sizes):
        j = i - offset
        if s == -1:
            new.append(old[j])
        else:
            new.append(as_expr(s))
    if new == list(old):
        return x

    def reindex(index):
        return [
            sympy.Integer(0) if (old[j] == 1 and new[j + offset] != 1) else index[j + offset]
            for j in range(len(old))
        ]

    return view_of(x, new, reindex)


@register(aten.unsqueeze.default)
def unsqueeze(x, dim):
    size = list(x.get_size())
    dim = normalize_dim(dim, len(size) + 1)
    new = size[:dim] + [sympy.Integer(1)] + size[dim:]
    return view_of(x, new, lambda index: list(index[:dim]) + list(index[dim + 1 :]))


@register(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def squeeze(x, dim=None):
    size = list(x.get_size())
    if dim is None:
        dims = [i for i, s in enumerate(size) if s == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [normalize_dim(d, len(size)) for d in dims] if size else []
        dims = [d for d in dims if size[d] == 1]
    if not dims:
        return x
    keep = [i for i in range(len(size)) if i not in dims]

    def reindex(index):
        old = [sympy.Integer(0)] * len(size)
        for k, i in enumerate(keep):
            old[i] = index[k]
        return old

    return view_of(x, [size[i] for i in keep], reindex)


@register(aten.slice.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):
    size = list(x.get_size())
    dim = normalize_dim(dim, len(size))
    if not (is_static(size[dim]) and all(isinstance(v, int | None) for v in (start, end, step))):
        return _slice_symbolic(x, size, dim, start, end, step)
    n = to_int(size[dim])
    start = 0 if start is None else start
    end = n if end is None else end
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    start, end = min(max(start, 0), n), min(max(end, 0), n)
    length = max(0, (end - start + step - 1) // step)
    if start == 0 and length == n and step == 1:
        return x
    new = size[:dim] + [sympy.Integer(length)] + size[dim + 1 :]

    def reindex(index):
        idx = list(index)
        idx[dim] = idx[dim] * step + start
        return idx

    return view_of(x, new, reindex)


def _slice_symbolic(x, size, dim, start, end, step):
    """A slice with a symbolic size or bound. The clamping branches follow the hints: the
    trace took the same branches and guarded them, so they hold for every accepted size."""
    if not isinstance(step, int) or step < 1:
        raise DynamicShapeUnsupported("slice with a symbolic step")
    n = as_expr(size[dim])
    start = sympy.Integer(0) if start is None else as_expr(start)
    end = n if end is None or (isinstance(end, int) and end >= 2**62) else as_expr(end)
    bounds = []
    for v in (start, end):
        if hint(v) < 0:
            v = v + n
        if hint(v) < 0:
            v = sympy.Integer(0)
        if hint(v) > hint(n):
            v = n
        bounds.append(v)
    start, end = bounds
    if hint(end) <= hint(start):
        raise DynamicShapeUnsupported("empty symbolic slice")
    length = end - start if step == 1 else FloorDiv(end - start + step - 1, step)
    if same(start, 0) and same(length, n) and step == 1:
        return x
    new = size[:dim] + [sympy.expand(length)] + size[dim + 1 :]

    def reindex(index):
        idx = list(index)
        idx[dim] = idx[dim] * step + start
        return idx

    return view_of(x, new, reindex)


@register(aten.select.int)
def select(x, dim, index):
    size = list(x.get_size())
    dim = normalize_dim(dim, len(size))
    n = size[dim]
    index = index + n if hint(index) < 0 else index
    new = size[:dim] + size[dim + 1 :]

    def reindex(idx):
        return list(idx[:dim]) + [as_expr(index)] + list(idx[dim:])

    return view_of(x, new, reindex)


def _infer_size(shape, numel):
    shape = [as_expr(s) for s in shape]
    if -1 in shape:
        known = product([s for s in shape if s != -1])
        if is_static(known) and is_static(numel):
            inferred = as_expr(int(numel) // int(known) if known else 0)
        else:
            inferred = sympy.cancel(as_expr(numel) / known)
            if not sympy.fraction(inferred)[1].is_Integer or not inferred.is_polynomial():
                raise DynamicShapeUnsupported(f"view: {numel} / {known} is not exact")
            inferred = sympy.expand(inferred)
        shape[shape.index(-1)] = inferred
    return shape


def _dim_groups(old, new):
    """Dims of two shapes of one numel (ints) matched in groups of equal products."""
    groups = []
    i = j = 0
    while i < len(old) or j < len(new):
        oi, nj = [], []
        po = pn = 1
        # take at least one dim from each side; once the products match, size-1 dims that
        # follow attach to this group (before any other dim, so that [7, 3] -> [7, 1, 3]
        # groups as 7 | 3 and needs no division)
        while True:
            if po == pn and (oi and nj or (i >= len(old) and j >= len(new))):
                if i < len(old) and old[i] == 1:
                    oi.append(i)
                    i += 1
                elif j < len(new) and new[j] == 1:
                    nj.append(j)
                    j += 1
                else:
                    break
            elif (po <= pn or j >= len(new)) and i < len(old):
                po *= old[i]
                oi.append(i)
                i += 1
            elif j < len(new):
                pn *= new[j]
                nj.append(j)
                j += 1
            else:
                break
        groups.append((oi, nj))
    return groups


def reshape_crosses_dims(old_size, new_size) -> bool:
    """Does reshaping ``old_size`` to ``new_size`` regroup dims across each other ([6, 4] ->
    [4, 6]) rather than only split or merge them ([24] -> [4, 6], [2, 3, 4] -> [6, 4])?"""
    old = [hint(s) for s in as_exprs(old_size)]
    new = [hint(s) for s in as_exprs(new_size)]
    return any(
        sum(old[k] != 1 for k in oi) > 1 and sum(new[k] != 1 for k in nj) > 1
        for oi, nj in _dim_groups(old, new)
    )


def reshape_indexer(old_size, new_size):
    """Maps an index of ``new_size`` to one of ``old_size`` (same numel): dims are matched in
    groups of equal products so aligned reshapes need no division. Symbolic sizes are grouped
    by their hints; a group whose products differ as expressions is refused."""
    old_e, new_e = as_exprs(old_size), as_exprs(new_size)
    old = [hint(s) for s in old_e]
    new = [hint(s) for s in new_e]
    groups = _dim_groups(old, new)  # (old dims, new dims)
    for oi, nj in groups:
        if not same(product([old_e[k] for k in oi]), product([new_e[k] for k in nj])):
            raise DynamicShapeUnsupported(f"reshape {old_e} -> {new_e}: dims do not group")

    def reindex(index):
        out = [sympy.Integer(0)] * len(old)
        for oi, nj in groups:
            flat = sympy.Integer(0)
            for k in nj:
                flat = flat * new_e[k] + index[k]
            # size-1 dims always index 0; the outermost remaining dim needs no modulo
            real = [k for k in oi if old_e[k] != 1]
            rem = sympy.Integer(1)
            for k in reversed(real):
                out[k] = (
                    IMod(FloorDiv(flat, rem), old_e[k]) if k != real[0] else FloorDiv(flat, rem)
                )
                rem = rem * old_e[k]
        return out

    return reindex


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(x, shape):
    old = x.get_size()
    total = product(old)
    new = _infer_size(shape, total)
    if same_sizes(new, old):
        return x
    if not same(product(new), total):
        raise NotLowered(f"view {old} -> {new} changes numel")
    return view_of(x, new, reshape_indexer(old, new))


@register(aten.as_strided.default)
def as_strided(x, size, stride, storage_offset=None):
    # Strides refer to the storage: only meaningful on a realized, dense buffer.
    base = realize_input(x)
    if isinstance(base, ReinterpretView):
        if not base.layout.is_contiguous():
            raise NotLowered("as_strided of a non-contiguous view")
        buf, off0 = base.buffer, base.layout.offset
    else:
        if not base.layout.is_contiguous():
            raise NotLowered("as_strided of a non-contiguous buffer")
        buf, off0 = base, base.layout.offset
    if storage_offset is None:
        off = as_expr(off0)
    else:  # counted from the storage's start, which lies buffer.storage_offset before its data
        off = as_expr(storage_offset) - buf.storage_offset
    layout = FixedLayout(x.get_dtype(), as_exprs(size), as_exprs(stride), off)
    return StridedNode(buf, layout)


class StridedNode(View):
    """A view given by explicit strides into a realized buffer (as_strided)."""

    def __init__(self, buffer, layout):
        self.buffer = buffer
        self.layout = layout
        self.base = StorageBox(buffer)
        self.size = layout.size

    def get_dtype(self):
        return self.layout.dtype

    def make_loader(self):
        name, layout = self.buffer.get_name(), self.layout
        return lambda index: ops.load(name, layout.index(index))


@register(aten.split.Tensor)
def split(x, split_size, dim=0):
    size = x.get_size()
    dim = normalize_dim(dim, len(size))
    n = to_int(size[dim])
    out = []
    for start in range(0, max(n, 1), split_size or 1):
        out.append(slice_(x, dim, start, min(start + split_size, n)))
        if n == 0:
            break
    return out


@register(aten.split_with_sizes.default)
def split_with_sizes(x, split_sizes, dim=0):
    dim = normalize_dim(dim, len(x.get_size()))
    out, start = [], 0
    for s in split_sizes:
        out.append(slice_(x, dim, start, start + s))
        start += s
    return out


@register(aten.unbind.int)
def unbind(x, dim=0):
    dim = normalize_dim(dim, len(x.get_size()))
    return [select(x, dim, i) for i in range(to_int(x.get_size()[dim]))]


@register(aten.expand_copy.default)
def expand_copy(x, sizes, implicit=False):
    return expand(x, sizes)


@register(aten.permute_copy.default)
def permute_copy(x, dims):
    return permute(x, dims)


@register(aten.view_copy.default)
def view_copy(x, shape):
    return view(x, shape)


@register(aten.unsqueeze_copy.default)
def unsqueeze_copy(x, dim):
    return unsqueeze(x, dim)


@register(aten.squeeze_copy.dim, aten.squeeze_copy.dims)
def squeeze_copy(x, dim):
    return squeeze(x, dim)


@register(aten.t_copy.default)
def t_copy(x):
    return t(x)


@register(aten.transpose_copy.int)
def transpose_copy(x, d0, d1):
    return transpose(x, d0, d1)


@register(aten.slice_copy.Tensor)
def slice_copy(x, dim=0, start=None, end=None, step=1):
    return slice_(x, dim, start, end, step)


@register(aten.select_copy.int)
def select_copy(x, dim, index):
    return select(x, dim, index)


def dtype_of(x) -> torch.dtype:
    return x.get_dtype()
