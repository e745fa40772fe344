"""Stride rules shared by the meta functions.

The rules mirror what eager PyTorch produces, so a meta function and the eager reference agree
exactly (the prim tests compare them):

* elementwise outputs: :func:`elementwise_strides` — dense, in the memory order of the inputs
  (eager's TensorIterator: contiguous if all inputs are, channels-last if all are, the inputs'
  own strides if they all share one dense layout, otherwise the inputs' dimension order);
* views: exact view strides (:func:`view_strides` for reshapes);
* reductions, scans' scratch, creation: contiguous (:func:`contiguous_strides`).
"""

from __future__ import annotations

from collections.abc import Sequence


def contiguous_strides(shape: Sequence) -> tuple:
    """Row-major strides; size-0/1 dims count as 1 (as torch's empty() does)."""
    strides = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc)
        acc = acc * (size if size > 1 else 1)
    return tuple(reversed(strides))


def channels_last_strides(shape: Sequence) -> tuple:
    """NHWC strides for a 4-d NCHW shape."""
    n, c, h, w = shape
    c1, w1, h1 = max(c, 1), max(w, 1), max(h, 1)
    return (h1 * w1 * c1, 1, w1 * c1, c1)


def is_contiguous(shape: Sequence, strides: Sequence) -> bool:
    if any(s == 0 for s in shape):
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def is_channels_last_contiguous(shape: Sequence, strides: Sequence) -> bool:
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def is_non_overlapping_and_dense(shape: Sequence, strides: Sequence) -> bool:
    ndim = len(shape)
    if ndim == 1:
        return shape[0] < 2 or strides[0] == 1
    # size < 2 dims last, others by stride (bool() settles symbolic comparisons with a guard)
    perm = sorted(
        range(ndim), key=lambda d: (bool(shape[d] < 2), 0 if bool(shape[d] < 2) else strides[d])
    )
    required = 1
    for d in perm:
        if shape[d] < 2:
            return True
        if strides[d] != required:
            return False
        required *= shape[d]
    return True


def elementwise_strides(shape: Sequence, input_strides: Sequence[Sequence]) -> tuple:
    """Output strides of an elementwise op whose same-shape inputs have ``input_strides``."""
    ndim = len(shape)
    if ndim == 0:
        return ()
    if not input_strides or all(is_contiguous(shape, s) for s in input_strides):
        return contiguous_strides(shape)
    if ndim == 4 and all(is_channels_last_contiguous(shape, s) for s in input_strides):
        return channels_last_strides(shape)
    if all(is_non_overlapping_and_dense(shape, s) for s in input_strides) and all(
        tuple(s) == tuple(input_strides[-1]) for s in input_strides
    ):
        return tuple(input_strides[0])
    perm = dense_order(shape, input_strides)  # innermost first
    if perm == list(reversed(range(ndim))):
        return contiguous_strides(shape)
    strides = [0] * ndim
    acc = 1
    for d in perm:
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def dense_order(shape: Sequence, input_strides: Sequence[Sequence]) -> list[int]:
    """Dimensions from innermost to outermost, ordered by the inputs' strides.

    Inputs are consulted in order; a stride-0 (broadcast) dim defers to the next input; equal
    strides put the smaller dim inside; undecided pairs keep the logical order.
    """
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for strides in input_strides:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def like_strides(shape: Sequence, strides: Sequence) -> tuple:
    """Strides of ``empty_like(x)`` (preserve_format): x's own if dense, else x's dense order."""
    if is_non_overlapping_and_dense(shape, strides):
        return tuple(strides)
    return elementwise_strides(shape, [strides])


def view_strides(old_shape: Sequence, old_strides: Sequence, new_shape: Sequence):
    """Strides that let ``new_shape`` view memory laid out as (old_shape, old_strides), or None.

    Walks matching chunks of dims from the right: each chunk of old dims that is contiguous in
    memory can be re-split into any dims with the same element count.
    """
    numel = 1
    for s in old_shape:
        numel *= s
    if numel == 0:
        if tuple(old_shape) == tuple(new_shape):
            return tuple(old_strides)
        return contiguous_strides(new_shape)
    if len(old_shape) == 0:
        return tuple(1 for _ in new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)
