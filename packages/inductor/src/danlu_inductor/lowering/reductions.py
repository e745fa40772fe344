"""Reductions (sum, prod, max, min, arg*, any/all, Welford mean/var) and the composite ops
written with them (mean, var, layer norm). Softmax, log-softmax and logsumexp: softmax.py."""

from __future__ import annotations

import itertools

import sympy
import torch

from danlu_inductor.ir.nodes import (
    Pointwise,
    Reduction,
    StorageBox,
    _LoadRecorder,
    current_graph,
)
from danlu_inductor.ir.ops import V, ops
from danlu_inductor.ir.symbols import (
    FloorDiv,
    IMod,
    hint,
    index_vars,
    is_static,
    product,
    simplify_index,
)
from danlu_inductor.lowering.registry import (
    NotLowered,
    aten,
    check_dtype,
    compute_dtype,
    make_pointwise,
    normalize_dim,
    register,
    to_dtype,
)
from danlu_inductor.lowering.row_block_partials import column_sum_row_block
from danlu_inductor.lowering.views import unsqueeze


def count_value(n, c):
    """The element count ``n`` as a value of dtype ``c`` (read from the sizes at run time
    when symbolic)."""
    if is_static(n):
        return ops.constant(float(n), c)
    return ops.to_dtype(ops.index_expr(n, torch.int64), c)


def _is_zero(s) -> bool:
    return is_static(s) and int(s) == 0  # symbolic sizes are >= 2


def _dims(x, dim):
    n = len(x.get_size())
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(n))
    if isinstance(dim, int):
        dim = [dim]
    if n == 0:
        return []
    return sorted({normalize_dim(d, n) for d in dim})


def reduction_body(x, dims, src_dtype):
    """``(inner, kept sizes, reduced sizes)`` of a reduction of ``x`` over ``dims``:
    ``inner(index, rindex)`` loads one element, as ``src_dtype``."""
    size = list(x.get_size())
    kept = [d for d in range(len(size)) if d not in dims]
    loader = x.make_loader()
    in_dtype = x.get_dtype()

    def inner(index, rindex):
        full = [None] * len(size)
        for d, i in zip(kept, index):
            full[d] = i
        for d, r in zip(dims, rindex):
            full[d] = r
        v = loader(full)
        return v if in_dtype == src_dtype else ops.to_dtype(v, src_dtype)

    return inner, [size[d] for d in kept], [size[d] for d in dims]


def split_count(inner, kept_sizes, red_sizes, reduction_type) -> tuple[int, bool]:
    """``(splits, chunk_major)``: how many chunks a GPU graph splits the reduced extent
    into (1: not split), and whether the partials are laid out chunk-major."""
    splits = _splits(kept_sizes, red_sizes, reduction_type)
    loads = _probe_loads(inner, kept_sizes, red_sizes) if splits > 1 else None
    if splits > 1 and _enough_rows(loads, kept_sizes, red_sizes):
        splits = 1
    chunk_major = splits > 1 and _contiguous_along_kept(loads, kept_sizes, red_sizes)
    if splits > 1 and not chunk_major and int(product(red_sizes)) < SPLIT_MIN_EXTENT:
        splits = 1  # a short row reduction (a softmax): its own looped kernel, not two
    return splits, chunk_major


def realized(node):
    box = StorageBox(node)
    box.realize()
    return box


def keep_dims(out, dims):
    for d in dims:
        out = unsqueeze(out, d)
    return out


def reduce(x, dims, reduction_type, out_dtype, src_dtype=None, keepdim=False):
    """A realized Reduction of ``x`` over ``dims`` (``keepdim`` adds size-1 views back)."""
    check_dtype(x.get_dtype())
    check_dtype(out_dtype)
    src_dtype = src_dtype or compute_dtype(x.get_dtype())
    inner, kept_sizes, red_sizes = reduction_body(x, dims, src_dtype)
    unrolled = _unrolled(inner, kept_sizes, red_sizes, reduction_type, out_dtype, src_dtype)
    if unrolled is not None:
        return keep_dims(unrolled, dims) if keepdim else unrolled
    splits, chunk_major = split_count(inner, kept_sizes, red_sizes, reduction_type)
    block = None
    if (
        splits > 1
        and chunk_major
        and getattr(current_graph(), "row_block_partials", False)
        and reduction_type == "sum"
        and src_dtype.is_floating_point
        and dims == list(range(len(dims)))
    ):
        # a column sum beside a row kernel over the same rows: chunks of that kernel's rows
        # a program, so its first stage joins the row kernel (row_block_partials.py)
        block = column_sum_row_block(
            kept_sizes, red_sizes, getattr(current_graph(), "current_node", None)
        )
        if block is not None:
            splits = int(hint(product(red_sizes))) // block
    if splits > 1:
        inner, red_sizes = split_first_stage(
            inner, kept_sizes, red_sizes, reduction_type, src_dtype, splits, chunk_major, block
        )
        groups = regroup_count(kept_sizes, splits) if block is not None else 1
        if groups > 1:
            inner, red_sizes = split_first_stage(
                inner, kept_sizes, red_sizes, reduction_type, src_dtype, groups, True
            )
    out = realized(Reduction(out_dtype, kept_sizes, red_sizes, reduction_type, inner, src_dtype))
    return keep_dims(out, dims) if keepdim else out


# A GPU reduction over at most this many values is a pointwise sum (max, ...) of that many
# loads: LLaMA training's grouped-query key and value gradients sum 4 heads ([8 x 4 x 1024 x
# 64 | r 4], the heads 64 values apart): as reductions their [XBLOCK, RBLOCK] tiles read 4
# values 128 bytes apart per row, 44 us a launch on the H100 against torch.compile's 7-8;
# as 4 loads each reads contiguous rows.
UNROLL_MAX_EXTENT = 8
_UNROLLABLE = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def _unrolled(inner, kept_sizes, red_sizes, reduction_type, out_dtype, src_dtype):
    """The reduction as a realized Pointwise combining its values in order, or None where it
    stays a reduction (CPU graphs, longer or symbolic extents, other reductions or dtypes)."""
    if (
        not current_graph().for_gpu
        or reduction_type not in _UNROLLABLE
        or not src_dtype.is_floating_point
        or not all(is_static(s) for s in red_sizes)
    ):
        return None
    extent = int(product(red_sizes))
    if not 1 <= extent <= UNROLL_MAX_EXTENT:
        return None
    # row-major over the reduced dims, as a reduction walks them
    points = [
        [sympy.Integer(i) for i in point]
        for point in itertools.product(*(range(int(s)) for s in red_sizes))
    ]
    combine = _UNROLLABLE[reduction_type]

    def fn(index):
        acc = inner(index, points[0])
        for r in points[1:]:
            acc = getattr(ops, combine)(acc, inner(index, r))
        return acc if out_dtype == src_dtype else ops.to_dtype(acc, out_dtype)

    return realized(Pointwise(out_dtype, kept_sizes, fn))


# Split reductions (GPU graphs): a reduction with few outputs and a long reduced extent (the
# bias and norm-weight gradients of a training step: 768 outputs, 4096 rows) would keep only a
# handful of programs busy. It runs as two: partial results over ``splits`` chunks of the
# reduced extent ([outputs, splits], many programs), then a short reduction over the chunks.
SPLIT_MAX_OUTPUTS = 16384
SPLIT_MIN_EXTENT = 4096
# A shorter extent of a column reduction (memory contiguous along the outputs) is split too
# when the outputs are few enough that one program per block of them leaves most of the GPU
# idle: ResNet-50's last stage (64 x 7 x 7 = 3136 values per
# channel, 512 or 2048 channels: 16 or 64 programs) spent 50-120 us on each of its batch-norm
# statistics and gradient sums on the H100 (run 48), a tenth of the bandwidth of the split ones.
SPLIT_MIN_EXTENT_FEW_OUTPUTS = 2048
SPLIT_FEW_OUTPUTS = 8192
SPLIT_CHUNK_MIN = 256
SPLIT_TARGET_PARTIALS = 1 << 16
_SPLITTABLE = ("sum", "prod", "max", "min", "any", "all")


def _splits(kept_sizes, red_sizes, reduction_type) -> int:
    # the chunks a column reduction would take; ``split_count`` keeps short row reductions
    # whole (the welford and embedding-gradient lowerings ask this directly)
    if not current_graph().for_gpu:
        return 1
    if reduction_type not in _SPLITTABLE or not all(
        is_static(s) for s in (*kept_sizes, *red_sizes)
    ):
        return 1
    outputs, extent = int(product(kept_sizes)), int(product(red_sizes))
    if outputs > SPLIT_MAX_OUTPUTS:
        return 1
    if extent < SPLIT_MIN_EXTENT and (
        extent < SPLIT_MIN_EXTENT_FEW_OUTPUTS or outputs > SPLIT_FEW_OUTPUTS
    ):
        return 1
    return _halvings(extent, SPLIT_CHUNK_MIN, outputs)


def _halvings(extent: int, min_chunk: int, outputs: int) -> int:
    """The most chunks, a power of two dividing ``extent`` (chunks stay whole: no ragged
    masks), each at least ``min_chunk`` long, ``outputs`` x chunks partials at most
    SPLIT_TARGET_PARTIALS."""
    splits = 1
    while (
        extent % (splits * 2) == 0
        and extent // (splits * 2) >= min_chunk
        and outputs * splits * 2 <= SPLIT_TARGET_PARTIALS
    ):
        splits *= 2
    return splits


# The row blocks' partials are many (8192 rows in blocks of 4: 2048 a column). One kernel
# summing them keeps few programs busy (1024 columns: 32 programs; LLaMA's 17 norm backwards
# spent 0.51 ms on an H200 there), so from REGROUP_MIN_PARTIALS on they are summed in groups
# of at least REGROUP_MIN_GROUP first: three stages, each with many programs.
REGROUP_MIN_PARTIALS = 128
REGROUP_MIN_GROUP = 16


def regroup_count(kept_sizes, partials: int) -> int:
    """How many groups the row blocks' ``partials`` (a column each) are summed in before the
    last stage: a power of two dividing them, 1 where they are few."""
    if partials < REGROUP_MIN_PARTIALS:
        return 1
    return _halvings(partials, REGROUP_MIN_GROUP, int(product(kept_sizes)))


# A row reduction (one reduced dim, read along memory: a layer norm's or a softmax's rows)
# with this many rows keeps enough programs busy unsplit: one row a program, 8 for each of an
# H200's 132 SMs. Splitting it only adds kernels and a pass over partials (a bf16 layer norm of
# 4096 rows of 4096: 5 kernels, 60 us against eager's 36).
SPLIT_ENOUGH_ROWS = 1024


def _probe_loads(inner, kept_sizes, red_sizes):
    """``(kept index vars, reduced index vars, [load index])`` of one run of the reduction's
    body on symbolic indices; None when the probe cannot run the body (callers then keep
    their default)."""
    kidx, ridx = index_vars("k", len(kept_sizes)), index_vars("r", len(red_sizes))
    rec = _LoadRecorder()
    try:
        with V.set_handler(rec):
            inner(kidx, ridx)
    except Exception:  # noqa: BLE001 - a body the probe cannot run
        return None
    return kidx, ridx, [simplify_index(sympy.sympify(expr)) for _, expr in rec.loads]


def _enough_rows(loads, kept_sizes, red_sizes) -> bool:
    if loads is None or int(product(kept_sizes)) < SPLIT_ENOUGH_ROWS:
        return False
    long = [i for i, s in enumerate(red_sizes) if s != 1]
    if len(long) != 1:
        return False
    _, ridx, exprs = loads
    r = ridx[long[0]]
    along = False
    for e in exprs:
        if not e.has(r):
            continue  # a per-row value (a norm's mean): one load a row
        if e.has(FloorDiv, IMod) or sympy.diff(e, r) != 1:
            return False
        along = True
    return along


def _contiguous_along_kept(loads, kept_sizes, red_sizes) -> bool:
    """Whether the reduction reads memory contiguously along a kept dim and strided along
    every reduced one: a per-channel sum over a channels-last tensor (batch-norm statistics
    and their gradients after a channels-last convolution)."""
    if loads is None:
        return False
    kidx, ridx, exprs = loads
    along_kept = False
    for e in exprs:
        if not any(e.has(v) for v, s in zip(kidx, kept_sizes) if s != 1):
            # the same value for every kept index (a norm's per-row mean and rstd): one
            # broadcast load per row, whatever the order; the per-element loads decide
            continue
        if e.has(FloorDiv, IMod):
            return False
        if any(s != 1 and sympy.diff(e, v) == 1 for v, s in zip(ridx, red_sizes)):
            return False
        along_kept |= any(s != 1 and sympy.diff(e, v) == 1 for v, s in zip(kidx, kept_sizes))
    return along_kept


def _chunked(inner, red_sizes, chunk, chunk_major):
    """``inner`` over the partials' index ``[split, *kept]`` (``[*kept, split]`` unless
    ``chunk_major``) and ``[r]``, r within the split's chunk of the flattened reduced dims."""

    def chunked(index, rindex):
        part, kept = (index[0], index[1:]) if chunk_major else (index[-1], index[:-1])
        flat = part * chunk + rindex[0]
        rdims, rest = [], flat
        for s in reversed(red_sizes[1:]):
            rdims.append(IMod(rest, s))
            rest = FloorDiv(rest, s)
        rdims.append(rest)
        return inner(kept, rdims[::-1])

    return chunked


def _partial_sizes(kept_sizes, splits, chunk_major):
    return [splits, *kept_sizes] if chunk_major else [*kept_sizes, splits]


def split_first_stage(
    inner, kept_sizes, red_sizes, reduction_type, src_dtype, splits, chunk_major, row_block=None
):
    """The partial reduction over ``splits`` chunks, realized; returns the second stage's
    ``inner`` (reading the partials) and its reduced sizes ``[splits]``. The partials are
    ``[*kept, splits]``, or ``[splits, *kept]`` when ``chunk_major`` (the input is contiguous
    along a kept dim: neighbouring programs then read neighbouring memory). ``row_block``:
    the chunk is a row kernel's block of rows, which the scheduler may fuse it into."""
    chunk = int(product(red_sizes)) // splits
    chunked = _chunked(inner, red_sizes, chunk, chunk_major)
    sizes = _partial_sizes(kept_sizes, splits, chunk_major)
    partial = Reduction(src_dtype, sizes, [chunk], reduction_type, chunked, src_dtype)
    partial.row_block = row_block
    box = StorageBox(partial)
    box.realize()
    load = box.make_loader()

    def second(index, rindex):
        return load([rindex[0], *index] if chunk_major else [*index, rindex[0]])

    return second, [splits]


def _sum_dtype(dtype):
    return torch.int64 if (dtype == torch.bool or not dtype.is_floating_point) else dtype


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(x, dim=None, keepdim=False, dtype=None):
    out = dtype or _sum_dtype(x.get_dtype())
    if out.is_complex or x.get_dtype().is_complex:
        raise NotLowered("complex")
    dims = _dims(x, dim)
    src = compute_dtype(out)
    return reduce(x, dims, "sum", out, src, keepdim)


@register(aten.prod.dim_int, aten.prod.default)
def prod(x, dim=None, keepdim=False, dtype=None):
    out = dtype or _sum_dtype(x.get_dtype())
    dims = _dims(x, dim)
    return reduce(x, dims, "prod", out, compute_dtype(out), keepdim)


@register(aten.mean.dim, aten.mean.default)
def mean(x, dim=None, keepdim=False, dtype=None):
    out = dtype or x.get_dtype()
    if not out.is_floating_point:
        raise NotLowered("mean of integers")
    dims = _dims(x, dim)
    n = product([x.get_size()[d] for d in dims])
    s = reduce(x, dims, "sum", out, compute_dtype(out), keepdim)
    c = compute_dtype(out)
    return make_pointwise([s], lambda v: ops.truediv(v, count_value(n, c)), out)


def _minmax(rtype):
    def lower(x, dim=None, keepdim=False):
        dims = _dims(x, dim)
        if x.get_dtype().is_complex:
            raise NotLowered("complex")
        if any(_is_zero(x.get_size()[d]) for d in dims):
            raise NotLowered("max/min over an empty dim")
        return reduce(x, dims, rtype, x.get_dtype(), compute_dtype(x.get_dtype()), keepdim)

    return lower


register(aten.amax.default)(_minmax("max"))
register(aten.amin.default)(_minmax("min"))


@register(aten.max.default)
def max_all(x):
    return _minmax("max")(x, None)


@register(aten.min.default)
def min_all(x):
    return _minmax("min")(x, None)


def _arg(rtype):
    def lower(x, dim=None, keepdim=False):
        if dim is None:
            from danlu_inductor.lowering.views import view

            flat = view(x, [-1])
            out = reduce(flat, [0], rtype, torch.int64, compute_dtype(x.get_dtype()))
            if keepdim:
                for d in range(len(x.get_size())):
                    out = unsqueeze(out, d)
            return out
        dims = _dims(x, dim)
        if any(_is_zero(x.get_size()[d]) for d in dims):
            raise NotLowered("argmax over an empty dim")
        return reduce(x, dims, rtype, torch.int64, compute_dtype(x.get_dtype()), keepdim)

    return lower


register(aten.argmax.default)(_arg("argmax"))
register(aten.argmin.default)(_arg("argmin"))


@register(aten.max.dim)
def max_dim(x, dim, keepdim=False):
    return _minmax("max")(x, dim, keepdim), _arg("argmax")(x, dim, keepdim)


@register(aten.min.dim)
def min_dim(x, dim, keepdim=False):
    return _minmax("min")(x, dim, keepdim), _arg("argmin")(x, dim, keepdim)


def _anyall(rtype):
    def lower(x, dim=None, keepdim=False):
        dims = _dims(x, dim)
        xb = to_dtype(x, torch.bool)
        return reduce(xb, dims, rtype, torch.bool, torch.bool, keepdim)

    return lower


register(aten.any.dims, aten.any.dim, aten.any.default)(_anyall("any"))
register(aten.all.dims, aten.all.dim, aten.all.default)(_anyall("all"))


TWO_PASS_MAX = 16384
# C++ kernels: a row of up to 256K float32 values (1 MB) is read back from the core's L2
# cache; one Welford pass over it runs scalar (its per-element division), two passes vectorize
TWO_PASS_MAX_CPU = 1 << 18


def welford(x, dims, keepdim):
    """(mean, m2, count) of ``x`` over ``dims``.

    Rows that stay in cache (up to TWO_PASS_MAX elements) use two vectorizable passes in the
    same kernel: mean, then the sum of squared deviations (as accurate as Welford, and
    several times faster than its per-element division). Reductions a GPU graph splits run
    a Welford pass per chunk (``split_welford``), or two split sums where the split is
    declined. Other long reductions use one Welford pass (both outputs share one
    accumulator), which also combines across threads.
    """
    c = compute_dtype(x.get_dtype())
    size = x.get_size()
    n = product([size[d] for d in dims])
    kept = [s for d, s in enumerate(size) if d not in dims]
    # a long reduction with few outputs (batch-norm statistics: 256 channels of 200704 values)
    # runs as split sums on the GPU, where one Welford pass would keep only a few programs busy
    split = _splits(kept, [size[d] for d in dims], "sum") > 1
    if split:
        stats = split_welford(x, dims, keepdim, c)
        if stats is not None:
            return stats
    limit = TWO_PASS_MAX if current_graph().for_gpu else TWO_PASS_MAX_CPU
    if hint(n) <= limit or split:
        from danlu_inductor.lowering.views import squeeze

        s = reduce(x, dims, "sum", c, c, keepdim=True)
        mean_k = make_pointwise([s], lambda v: ops.truediv(v, count_value(n, c)), c, c)

        def sq_dev(a, m):
            d = ops.sub(a, m)
            return ops.mul(d, d)

        m2 = reduce(make_pointwise([x, mean_k], sq_dev, c, c), dims, "sum", c, c, keepdim)
        return (mean_k if keepdim else squeeze(mean_k, dims)), m2, n
    mean_ = reduce(x, dims, "welford_mean", c, c, keepdim)
    m2 = reduce(x, dims, "welford_m2", c, c, keepdim)
    return mean_, m2, n


def split_welford(x, dims, keepdim, c):
    """(mean, m2, count) of a reduction a GPU graph splits (batch-norm statistics: 64 channels
    of 802816 values), reading ``x`` once. Each chunk sums its values shifted by its first
    value, and their squares, in one pass (``s1``, ``s2``): its mean is ``shift + s1 / chunk``
    and its m2 ``s2 - s1^2 / chunk``, accurate while the shift lies within a few standard
    deviations of the chunk's mean (one of its values does, short of a far outlier). The
    chunks then combine exactly in a second kernel, m2 = sum of the chunks' m2 + chunk *
    (chunk mean - mean)^2 (the chunks are equal). A chunk summed, then summed again as squared
    deviations from its mean, read it twice (the second pass missed the cache: 73 us against
    30 for ResNet-50's 64 x 256 x 56 x 56 statistics on the H200); a Welford update an
    element divides once per value (55 us against 47 shifted, hand-written on the H200, run
    67). None where the reduction is not split."""
    inner, kept_sizes, red_sizes = reduction_body(x, dims, c)
    splits, chunk_major = split_count(inner, kept_sizes, red_sizes, "sum")
    if splits <= 1:
        return None
    n = int(product(red_sizes))
    chunk = n // splits
    chunked = _chunked(inner, red_sizes, chunk, chunk_major)
    sizes = _partial_sizes(kept_sizes, splits, chunk_major)
    first = [sympy.Integer(0)]

    def shifted(index, rindex):
        return ops.sub(chunked(index, rindex), chunked(index, first))

    def shifted_sq(index, rindex):
        d = shifted(index, rindex)
        return ops.mul(d, d)

    # one kernel when the scheduler fuses them (same loads, two accumulators)
    load_s1 = realized(Reduction(c, sizes, [chunk], "sum", shifted, c)).make_loader()
    load_s2 = realized(Reduction(c, sizes, [chunk], "sum", shifted_sq, c)).make_loader()

    def part(index, r):
        return [r, *index] if chunk_major else [*index, r]

    def chunk_mean(p):
        return ops.add(chunked(p, first), ops.truediv(load_s1(p), ops.constant(float(chunk), c)))

    def means_inner(index, rindex):
        return chunk_mean(part(index, rindex[0]))

    means = realized(Reduction(c, kept_sizes, [splits], "sum", means_inner, c))
    mean_ = make_pointwise([means], lambda v: ops.truediv(v, ops.constant(float(splits), c)), c, c)
    load_total_mean = mean_.make_loader()

    def combine(index, rindex):
        p = part(index, rindex[0])
        s1 = load_s1(p)
        own = ops.sub(load_s2(p), ops.truediv(ops.mul(s1, s1), ops.constant(float(chunk), c)))
        d = ops.sub(chunk_mean(p), load_total_mean(index))
        return ops.add(own, ops.mul(ops.constant(float(chunk), c), ops.mul(d, d)))

    m2 = realized(Reduction(c, kept_sizes, [splits], "sum", combine, c))
    if keepdim:
        return keep_dims(mean_, dims), keep_dims(m2, dims), n
    return mean_, m2, n


def _var_from_m2(m2, n, correction, out_dtype):
    c = compute_dtype(out_dtype)
    if is_static(n):
        denom = float(max(int(n) - correction, 0))
        return make_pointwise([m2], lambda v: ops.truediv(v, ops.constant(denom, c)), out_dtype, c)
    d = sympy.Max(n - correction, 0)
    return make_pointwise([m2], lambda v: ops.truediv(v, count_value(d, c)), out_dtype, c)


@register(aten.var.correction, aten.var.dim)
def var(x, dim=None, unbiased=None, keepdim=False, correction=None, **kwargs):
    correction = _correction(unbiased, correction)
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowered("var of integers")
    dims = _dims(x, dim)
    _, m2, n = welford(x, dims, keepdim)
    return _var_from_m2(m2, n, correction, dtype)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


@register(aten.std.correction, aten.std.dim)
def std(x, dim=None, unbiased=None, keepdim=False, correction=None):
    v = var(x, dim, unbiased, keepdim, correction)
    return make_pointwise([v], ops.sqrt, x.get_dtype())


@register(aten.var_mean.correction, aten.var_mean.dim)
def var_mean(x, dim=None, unbiased=None, keepdim=False, correction=None):
    correction = _correction(unbiased, correction)
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowered("var_mean of integers")
    dims = _dims(x, dim)
    mean_, m2, n = welford(x, dims, keepdim)
    return _var_from_m2(m2, n, correction, dtype), to_dtype(mean_, dtype)


@register(aten.native_layer_norm.default)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowered("layer norm of integers")
    c = compute_dtype(dtype)
    n = len(x.get_size())
    k = len(normalized_shape)
    dims = list(range(n - k, n))
    mean_, m2, count = welford(x, dims, keepdim=True)
    rstd = make_pointwise(
        [m2],
        lambda v: ops.rsqrt(ops.add(ops.truediv(v, count_value(count, c)), ops.constant(eps, c))),
        c,
        c,
    )
    inputs = [x, mean_, rstd] + [t for t in (weight, bias) if t is not None]

    def body(v, mu, r, *wb):
        y = ops.mul(ops.sub(v, mu), r)
        i = 0
        if weight is not None:
            y = ops.mul(y, wb[i])
            i += 1
        if bias is not None:
            y = ops.add(y, wb[i])
        return y

    out = make_pointwise(inputs, body, dtype, c)
    # eager returns mean/rstd in the input's dtype family (float32 for reduced floats on CPU)
    stat_dtype = c if dtype in (torch.float16, torch.bfloat16) else dtype
    return out, to_dtype(mean_, stat_dtype), to_dtype(rstd, stat_dtype)


@register(aten._native_batch_norm_legit_no_training.default)
def batch_norm_inference(x, weight, bias, running_mean, running_var, momentum, eps):
    dtype = x.get_dtype()
    if not dtype.is_floating_point or len(x.get_size()) < 2:
        raise NotLowered("batch norm variant")
    c = compute_dtype(dtype)
    nd = len(x.get_size())

    def chan(t):
        # [C] -> [C, 1, 1, ...] so it broadcasts along dim 1
        out = t
        for _ in range(nd - 2):
            out = unsqueeze(out, -1)
        return out

    stats = [chan(running_mean), chan(running_var)]
    extra = [chan(t) for t in (weight, bias) if t is not None]

    def body(v, mu, var_, *wb):
        y = ops.mul(ops.sub(v, mu), ops.rsqrt(ops.add(var_, ops.constant(eps, c))))
        i = 0
        if weight is not None:
            y = ops.mul(y, wb[i])
            i += 1
        if bias is not None:
            y = ops.add(y, wb[i])
        return y

    out = make_pointwise([x, *stats, *extra], body, dtype, c)
    empty = StorageBox(Pointwise(dtype, [sympy.Integer(0)], lambda i: ops.constant(0, dtype)))
    return out, empty, empty
