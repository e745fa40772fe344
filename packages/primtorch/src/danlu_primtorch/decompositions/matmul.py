"""Products written from ``mm``/``bmm``/``addmm`` and pointwise math."""

from __future__ import annotations

import torch

from danlu_primtorch.decompositions.registry import register

aten = torch.ops.aten


def _scaled(x, s):
    return x if s == 1 else aten.mul.Tensor(x, s)


def _coef(x, s):
    # integral products take integral alpha/beta (ATen truncates the scalar to the tensor type)
    return (
        s if (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool) else int(s)
    )


def _add_beta(prod, self, beta):
    # beta == 0 ignores self entirely (NaN/inf in self must not leak), as BLAS semantics say
    if beta == 0:
        return prod
    return aten.add.Tensor(_scaled(self, beta), prod)


@register(aten.dot.default)
def dot(self, tensor):
    if self.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors"
        )
    if self.dtype != tensor.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {self.dtype} and {tensor.dtype}"
        )
    if self.shape[0] != tensor.shape[0]:
        raise RuntimeError("inconsistent tensor size")
    return aten.view.default(
        aten.mm.default(aten.unsqueeze.default(self, 0), aten.unsqueeze.default(tensor, 1)), []
    )


@register(aten.vdot.default)
def vdot(self, other):
    if self.dtype.is_complex:
        return NotImplemented  # complex vdot (conjugating) stays an ATen op
    return dot(self, other)


@register(aten.mv.default)
def mv(self, vec):
    if self.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {self.dim()}, {vec.dim()}")
    return aten.squeeze.dims(aten.mm.default(self, aten.unsqueeze.default(vec, 1)), [1])


@register(aten.addmv.default)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    beta, alpha = _coef(self, beta), _coef(self, alpha)
    return _add_beta(_scaled(mv(mat, vec), alpha), self, beta)


@register(aten.addr.default)
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    beta, alpha = _coef(self, beta), _coef(self, alpha)
    outer = aten.mul.Tensor(aten.unsqueeze.default(vec1, 1), aten.unsqueeze.default(vec2, 0))
    if self.dtype == torch.bool:
        out = outer
        if beta:
            out = aten.logical_or.default(self, out)
        return out
    out = _scaled(outer, alpha)
    if beta == 0:
        return aten.clone.default(aten.expand.default(out, list(out.shape)))
    return aten.add.Tensor(_scaled(self, beta), out)


@register(aten.baddbmm.default)
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    beta, alpha = _coef(self, beta), _coef(self, alpha)
    prod = _scaled(aten.bmm.default(batch1, batch2), alpha)
    if beta == 0:
        return prod
    return aten.add.Tensor(_scaled(self, beta), prod)


@register(aten.addbmm.default)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    beta, alpha = _coef(self, beta), _coef(self, alpha)
    bmm = aten.bmm.default(batch1, batch2)
    prod = _scaled(aten.sum.dim_IntList(bmm, [0], False, dtype=bmm.dtype), alpha)
    if beta == 0:
        return aten.clone.default(aten.expand.default(prod, list(prod.shape)))
    return aten.add.Tensor(_scaled(self, beta), prod)


@register(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    a = i1
    for d in expand1:
        a = aten.unsqueeze.default(a, d)
    b = i2
    for d in expand2:
        b = aten.unsqueeze.default(b, d)
    c = i3
    for d in expand3:
        c = aten.unsqueeze.default(c, d)
    prod = aten.mul.Tensor(aten.mul.Tensor(a, b), c)
    return aten.sum.dim_IntList(prod, list(sumdim), False, dtype=prod.dtype) if sumdim else prod
