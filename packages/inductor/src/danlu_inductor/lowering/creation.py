"""Creation (full, arange, scalar_tensor) and data movement (cat, pad, gathers)."""

from __future__ import annotations

import sympy
import torch

from danlu_inductor.ir.nodes import (
    ConstantBuffer,
    Pointwise,
    ReinterpretView,
    StorageBox,
    View,
    current_graph,
    never_negative,
)
from danlu_inductor.ir.ops import ops
from danlu_inductor.ir.symbols import FloorDiv, SelectedClamp, as_expr, as_exprs, is_static
from danlu_inductor.lowering.registry import (
    NotLowered,
    aten,
    check_dtype,
    compute_dtype,
    normalize_dim,
    register,
    result_type,
    to_dtype,
)


def _cpu(device):
    # compile_fx lowers single-device graphs only (CPU: C++, CUDA: Triton), so a created
    # tensor lives where the graph's buffers are allocated
    if device is not None and torch.device(device).type not in ("cpu", "cuda"):
        raise NotLowered(f"device {device}")


def _fill(size, value, dtype):
    check_dtype(dtype)
    if isinstance(value, sympy.Expr) and not value.is_number:
        # a symbolic size as the value (a clamp bound of size - 1 under dynamic shapes)
        if not value.is_integer:
            raise NotLowered(f"symbolic fill value {value}")

        def sized(index):
            v = ops.index_expr(value, torch.int64)
            return v if dtype == torch.int64 else ops.to_dtype(v, dtype)

        return StorageBox(Pointwise(dtype, as_exprs(size), sized))
    return StorageBox(Pointwise(dtype, as_exprs(size), lambda index: ops.constant(value, dtype)))


@register(aten.full.default)
def full(size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    _cpu(device)
    if dtype is None:
        dtype = result_type(fill_value)
    return _fill(size, fill_value, dtype)


@register(aten.scalar_tensor.default)
def scalar_tensor(value, dtype=None, layout=None, device=None, pin_memory=None):
    _cpu(device)
    return _fill([], value, dtype or torch.get_default_dtype())


@register(aten.zeros.default)
def zeros(size, dtype=None, layout=None, device=None, pin_memory=None):
    _cpu(device)
    return _fill(size, 0, dtype or torch.get_default_dtype())


@register(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    # autograd's placeholder for a zero gradient (sgn's backward, say): ATen gives it no
    # memory, so it cannot reach a kernel as a buffer; as a value it is zeros
    return zeros(size, dtype, layout, device, pin_memory)


@register(aten.ones.default)
def ones(size, dtype=None, layout=None, device=None, pin_memory=None):
    _cpu(device)
    return _fill(size, 1, dtype or torch.get_default_dtype())


@register(aten.full_like.default)
def full_like(
    x, fill_value, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    _cpu(device)
    return _fill(x.get_size(), fill_value, dtype or x.get_dtype())


@register(aten.zeros_like.default)
def zeros_like(x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_like(x, 0, dtype, device=device)


@register(aten.ones_like.default)
def ones_like(x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_like(x, 1, dtype, device=device)


@register(aten.fill.Scalar)
def fill(x, value):
    return _fill(x.get_size(), value, x.get_dtype())


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    _cpu(device)
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    elif len(args) == 2:
        start, end, step = args[0], args[1], 1
    else:
        start, end, step = args
    symbolic = any(isinstance(v, sympy.Basic) for v in (start, end, step))
    if dtype is None:
        dtype = torch.int64 if symbolic else result_type(start, end, step)
    if any(isinstance(v, float) for v in (start, end, step)) or dtype.is_floating_point:
        raise NotLowered("floating arange (length rounding rules)")
    if symbolic:
        if not (isinstance(step, int) and step > 0):
            raise NotLowered("arange with a symbolic or negative step")
        n = as_expr(end) - as_expr(start)  # the trace guarded end > start
        n = n if step == 1 else FloorDiv(n + step - 1, step)
    else:
        n = max(0, -(-(end - start) // step))

    def inner(index):
        return ops.index_expr(index[0] * step + start, dtype)

    check_dtype(dtype)
    return StorageBox(Pointwise(dtype, [as_expr(n)], inner))


@register(aten.cat.default)
def cat(tensors, dim=0):
    tensors = [t for t in tensors if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)] or [
        tensors[0]
    ]
    dtype = result_type(*tensors)
    check_dtype(dtype)
    tensors = [to_dtype(t, dtype) for t in tensors]
    if len(tensors) == 1:
        from danlu_inductor.lowering.pointwise import clone

        return clone(tensors[0])
    ndim = len(tensors[0].get_size())
    dim = normalize_dim(dim, ndim)
    size = list(tensors[0].get_size())
    offsets, total = [], sympy.Integer(0)
    for t in tensors:
        offsets.append(total)
        total += as_expr(t.get_size()[dim])
    size[dim] = total
    loaders = [t.make_loader() for t in tensors]
    lengths = [as_expr(t.get_size()[dim]) for t in tensors]
    c = compute_dtype(dtype)

    def inner(index):
        # Each input is read at a clamped index (always in bounds), the right one selected
        # (Triton masks those loads instead: a lane reads only its own input).
        result = None
        for k in reversed(range(len(tensors))):
            idx = list(index)
            idx[dim] = SelectedClamp(index[dim] - offsets[k], 0, _last(lengths[k]))
            v = loaders[k](idx)
            if c != dtype:
                v = ops.to_dtype(v, c)
            if result is None:
                result = v
            else:
                inside = ops.lt(
                    ops.index_expr(index[dim], torch.int64),
                    _int_value(offsets[k] + lengths[k]),
                )
                result = ops.where(inside, v, result)
        return result if c == dtype else ops.to_dtype(result, dtype)

    return StorageBox(Pointwise(dtype, size, inner))


def _last(n):
    """The last valid index of a dim of size ``n`` (0 for an empty dim)."""
    return sympy.Integer(max(int(n) - 1, 0)) if is_static(n) else n - 1  # symbolic: n >= 2


def _int_value(e):
    return ops.constant(int(e), torch.int64) if is_static(e) else ops.index_expr(e, torch.int64)


@register(aten.constant_pad_nd.default)
def constant_pad_nd(x, pad, value=0):
    size = list(x.get_size())
    dtype = x.get_dtype()
    c = compute_dtype(dtype)
    new = list(size)
    lows = [0] * len(size)
    for k in range(len(pad) // 2):
        d = len(size) - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if not all(never_negative(current_graph().trace_expr(p)) for p in (lo, hi)):
            # a negative pad crops (or, symbolic, might): ATen's kernel does that. A symbolic
            # one is decided by the trace's ranges: CUDA attention pads its mask's last dim by
            # 16 - n % 16
            raise NotLowered("negative padding, or padding not known to be non-negative")
        lows[d] = lo
        new[d] = size[d] + lo + hi
    load = x.make_loader()

    def inner(index):
        idx, conds = [], []
        for d, i in enumerate(index):
            n = as_expr(size[d])
            if new[d] == size[d]:
                idx.append(i)
                continue
            idx.append(SelectedClamp(i - lows[d], 0, _last(n)))
            conds.append((i, lows[d], lows[d] + n))
        v = load(idx)
        if c != dtype:
            v = ops.to_dtype(v, c)
        ok = None
        for i, lo, hi in conds:
            e = ops.index_expr(i, torch.int64)
            cnd = ops.logical_and(ops.ge(e, _int_value(lo)), ops.lt(e, _int_value(hi)))
            ok = cnd if ok is None else ops.logical_and(ok, cnd)
        if ok is not None:
            v = ops.where(ok, v, ops.constant(value, c))
        return v if c == dtype else ops.to_dtype(v, dtype)

    return StorageBox(Pointwise(dtype, new, inner))


def _known_in_range(index, n) -> bool:
    """Whether every value of ``index`` is a position in ``[0, n)`` already at compile time:
    a constant (a folded table such as max pooling's gradient's window indices), read whole
    or through views. Gathers through it need no wrap, no bounds check and no clamp (ResNet-50
    training's stem gradient checked four such tables for each of its 51 M elements)."""
    node = index.storage_box() if isinstance(index, View) else index
    if isinstance(node, StorageBox):
        node = node.unwrap_buffer()
    elif isinstance(node, ReinterpretView):
        node = node.buffer
    if not isinstance(node, ConstantBuffer):
        return False
    v = node.value
    if not is_static(n) or v.numel() == 0 or v.is_floating_point() or v.dtype == torch.bool:
        return False
    return bool(v.min() >= 0) and bool(v.max() < int(n))


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if len(weight.get_size()) != 2 or indices.get_dtype() not in (torch.int64, torch.int32):
        raise NotLowered("embedding variant")
    wload, iload = weight.make_loader(), indices.make_loader()
    nrows = as_expr(weight.get_size()[0])
    isize = list(indices.get_size())

    checked = not _known_in_range(indices, nrows)

    def inner(index):
        row = ops.indirect_indexing(iload(index[: len(isize)]), nrows, checked)
        return wload([row, index[len(isize)]])

    return StorageBox(Pointwise(weight.get_dtype(), isize + [weight.get_size()[1]], inner))


@register(aten.index_select.default)
def index_select(x, dim, index):
    size = list(x.get_size())
    if not size or len(index.get_size()) > 1:
        raise NotLowered("index_select variant")
    dim = normalize_dim(dim, len(size))
    xload, iload = x.make_loader(), index.make_loader()
    n = as_expr(size[dim])
    new = list(size)
    new[dim] = index.get_size()[0] if index.get_size() else sympy.Integer(1)
    checked = not _known_in_range(index, n)

    def inner(idx):
        pos = ops.indirect_indexing(iload([idx[dim]] if index.get_size() else []), n, checked)
        full = list(idx)
        full[dim] = pos
        return xload(full)

    return StorageBox(Pointwise(x.get_dtype(), new, inner))


@register(aten.gather.default)
def gather(x, dim, index, sparse_grad=False):
    size = list(x.get_size())
    if len(size) != len(index.get_size()) or not size:
        raise NotLowered("gather variant")
    dim = normalize_dim(dim, len(size))
    xload, iload = x.make_loader(), index.make_loader()
    n = as_expr(size[dim])
    checked = not _known_in_range(index, n)

    def inner(idx):
        pos = ops.indirect_indexing(iload(idx), n, checked)
        full = list(idx)
        full[dim] = pos
        return xload(full)

    return StorageBox(Pointwise(x.get_dtype(), index.get_size(), inner))


@register(aten.index.Tensor)
def index(x, indices):
    """``x[i0, i1, ...]`` with integer index tensors (None = whole dim). Index tensors are
    broadcast together; their result dims go where torch puts them: in place of the indexed
    dims if those are adjacent, else first. Boolean masks (data-dependent shape) fall back."""
    size = list(x.get_size())
    indices = list(indices) + [None] * (len(size) - len(indices))
    tensors = [(d, t) for d, t in enumerate(indices) if t is not None]
    if not tensors or any(t.get_dtype() not in (torch.int64, torch.int32) for _, t in tensors):
        raise NotLowered("index with boolean or no index tensors")
    from danlu_inductor.lowering.registry import broadcast_loader, broadcast_shapes

    bshape = broadcast_shapes(*[t.get_size() for _, t in tensors])
    dims = [d for d, _ in tensors]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    rest = [d for d in range(len(size)) if d not in dims]
    if adjacent:
        before = [d for d in rest if d < dims[0]]
        after = [d for d in rest if d > dims[-1]]
    else:
        before, after = [], rest
    out_size = [size[d] for d in before] + list(bshape) + [size[d] for d in after]
    xload = x.make_loader()
    loaders = [
        (d, broadcast_loader(t, bshape), not _known_in_range(t, as_expr(size[d])))
        for d, t in tensors
    ]
    nb = len(bshape)

    def inner(idx):
        full = [None] * len(size)
        for k, d in enumerate(before):
            full[d] = idx[k]
        bidx = idx[len(before) : len(before) + nb]
        for k, d in enumerate(after):
            full[d] = idx[len(before) + nb + k]
        for d, load, checked in loaders:
            full[d] = ops.indirect_indexing(load(bidx), as_expr(size[d]), checked)
        return xload(full)

    return StorageBox(Pointwise(x.get_dtype(), out_size, inner))
