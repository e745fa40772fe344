"""Facts about ATen ops that functionalization needs.

- which arguments an op writes to, and the out-of-place op that computes the same values;
- which results are views of which argument;
- how to replay a view step on a new base, and how to scatter a new view value back into
  its base (the inverse of one view step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from danlu_aotautograd.errors import AotNotSupported

aten = torch.ops.aten

# In-place ops whose out-of-place twin does not follow the `op_` -> `op` naming.
_SPECIAL_FUNCTIONAL = {
    aten.bernoulli_.float: aten.bernoulli.p,
    aten.normal_.default: aten.normal_functional.default,
    aten.native_batch_norm.out: None,
}


def mutated_args(func) -> list[str]:
    """Names of the arguments ``func`` writes to (alias annotation with ``!``)."""
    return [a.name for a in func._schema.arguments if a.alias_info and a.alias_info.is_write]


def view_source(func, out_index: int) -> str | None:
    """Name of the argument result ``out_index`` is a (non-mutating) view of, or None."""
    rets = func._schema.returns
    if out_index >= len(rets):
        out_index = 0 if len(rets) == 1 else out_index  # list return: every element shares it
    info = rets[min(out_index, len(rets) - 1)].alias_info
    if info is None or info.is_write:
        return None
    for a in func._schema.arguments:
        if (
            a.alias_info
            and not a.alias_info.is_write
            and (a.alias_info.before_set & info.before_set)
        ):
            return a.name
    # A list of views (`Tensor(a)[]`, as in split/unbind) keeps its alias set on the element
    # type, which the Python schema does not expose: the aliased argument is the annotated one.
    annotated = [
        a.name for a in func._schema.arguments if a.alias_info and not a.alias_info.is_write
    ]
    if annotated:
        return annotated[0]
    raise AotNotSupported(f"{func}: result {out_index} aliases an argument we cannot identify")


def _overload(packet_name: str, overload: str):
    packet = getattr(aten, packet_name, None)
    if packet is None:
        return None
    return getattr(packet, overload, None) if overload in packet.overloads() else None


def _same_arguments(a, b) -> bool:
    """Same argument names and types (mutability annotations aside)."""

    def args(op):
        return [(x.name, str(x.type)) for x in op._schema.arguments]

    return args(a) == args(b)


def _is_functional(op) -> bool:
    return not mutated_args(op)


def functional_variant(func):
    """The out-of-place op for a mutating ``func`` and how its results map back.

    Returns ``(op, kind)``; kind is ``"inplace"`` (``op`` returns the new value of each written
    argument, in order), ``"extra"`` (``op`` returns ``func``'s results followed by the new
    values of the written arguments) or ``"out"`` (``op`` returns the values written to the
    ``out`` arguments).
    """
    if func in _SPECIAL_FUNCTIONAL and _SPECIAL_FUNCTIONAL[func] is not None:
        return _SPECIAL_FUNCTIONAL[func], "inplace"
    name = func._schema.name.split("::")[-1]
    ovl = func._overloadname
    written = mutated_args(func)
    kwarg_only_written = all(a.kwarg_only for a in func._schema.arguments if a.name in written)
    if name.endswith("_") and not name.endswith("__") and "self" in written:
        # the overload with the same arguments; names do not always pair up: pow_.Scalar
        # (Tensor self, Scalar exponent) is pow.Tensor_Scalar, while pow.Scalar is
        # (Scalar self, Tensor exponent)
        packet = getattr(aten, name[:-1], None)
        for o in packet.overloads() if packet is not None else ():
            cand = getattr(packet, o)
            if _is_functional(cand) and _same_arguments(cand, func):
                return cand, "inplace"
    cand = _overload(name + "_functional", ovl)
    if cand is not None and _is_functional(cand):
        return cand, "extra"
    if kwarg_only_written:
        # `op.out(..., *, out)`: the overload with the same non-out arguments.
        wanted = [a.name for a in func._schema.arguments if a.name not in written]
        packet = getattr(aten, name)
        for o in packet.overloads():
            cand = getattr(packet, o)
            if _is_functional(cand) and [a.name for a in cand._schema.arguments] == wanted:
                return cand, "out"
    raise AotNotSupported(
        f"cannot functionalize {func}: it writes to {written} and has no out-of-place twin"
    )


@dataclass(frozen=True)
class ViewStep:
    """One view op applied to a base: ``func(base, *args, **kwargs)[index]``."""

    func: Any
    args: tuple
    kwargs: dict
    index: int | None = None

    def apply(self, base):
        out = self.func(base, *self.args, **self.kwargs)
        return out if self.index is None else out[self.index]

    def __str__(self) -> str:
        idx = "" if self.index is None else f"[{self.index}]"
        return f"{self.func}{self.args}{idx}"


_IDENTITY_VIEWS = {aten.alias.default, aten.detach.default, aten.lift_fresh.default}
_RESHAPES = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.view_as.default,
    aten.flatten.using_ints,
    aten.unflatten.int,
}


def inverse_step(step: ViewStep, base_meta: torch.Tensor) -> tuple[str, Any, tuple]:
    """How to write a new value of ``step``'s view back into its base, functionally.

    Returns ``(kind, op, extra)``: ``"scatter"`` -> ``op(base, new, *extra)``; ``"unary"`` ->
    ``op(new, *extra)`` (the view covers the whole base); ``"identity"`` -> ``new`` itself.
    """
    f, a = step.func, step.args
    if f in _IDENTITY_VIEWS:
        return ("identity", None, ())
    if f is aten.slice.Tensor:
        dim = a[0] if len(a) > 0 else 0
        start = a[1] if len(a) > 1 else None
        end = a[2] if len(a) > 2 else None
        stp = a[3] if len(a) > 3 else 1
        return ("scatter", aten.slice_scatter.default, (dim, start, end, stp))
    if f is aten.select.int:
        return ("scatter", aten.select_scatter.default, tuple(a))
    if f is aten.diagonal.default:
        return ("scatter", aten.diagonal_scatter.default, tuple(a))
    if f in (aten.t.default,):
        return ("unary", aten.t.default, ())
    if f is aten.transpose.int:
        return ("unary", aten.transpose.int, tuple(a))
    if f is aten.permute.default:
        dims = [d % base_meta.dim() for d in a[0]]
        inv = [0] * len(dims)
        for i, d in enumerate(dims):
            inv[d] = i
        return ("unary", aten.permute.default, (inv,))
    if f in _RESHAPES:
        return ("unary", aten.reshape.default, (list(base_meta.shape),))
    if f is aten.unbind.int:
        dim = a[0] if a else 0
        return ("scatter", aten.select_scatter.default, (dim, step.index))
    if f in (aten.split.Tensor, aten.split_with_sizes.default):
        dim = a[1] if len(a) > 1 else step.kwargs.get("dim", 0)
        dim = dim % base_meta.dim()
        n = base_meta.shape[dim]
        if f is aten.split.Tensor:
            size = a[0]
            start = step.index * size
            end = min(start + size, n)
        else:
            sizes = a[0]
            start = sum(sizes[: step.index])
            end = start + sizes[step.index]
        return ("scatter", aten.slice_scatter.default, (dim, start, end, 1))
    if f is aten.as_strided.default:
        if base_meta.storage_offset() != 0 or not _dense(base_meta):
            raise AotNotSupported(
                "mutation through an as_strided view of a non-contiguous or offset base"
            )
        return ("scatter", aten.as_strided_scatter.default, tuple(a))
    raise AotNotSupported(f"mutation through a view made by {f} is not supported")


def _dense(t: torch.Tensor) -> bool:
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True
