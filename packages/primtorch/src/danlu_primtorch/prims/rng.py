"""Random-number prims.

Generator semantics (the same for every RNG prim): the numbers come from ``generator`` if one
is given, else from the default generator of ``device``; the prim advances that generator
exactly as the matching eager call does, so a program seeded with ``torch.manual_seed`` gives
the same bits as eager on the same device (``uniform`` = ``Tensor.uniform_``, ``normal`` =
``Tensor.normal_``, ``randint`` = ``Tensor.random_``, ``bernoulli`` = ``torch.bernoulli``).
A backend that generates numbers itself (for example a counter-based RNG inside a fused kernel)
keeps the distribution but not the bits, and must say so.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.checks import dtype_in, fail
from danlu_primtorch.prims.registry import PrimKind, define_prim
from danlu_primtorch.prims.strides import contiguous_strides

OPS: dict[str, torch._ops.OpOverload] = {}


def _new(shape, dtype, device):
    if any(s < 0 for s in shape):
        fail("rng", f"negative size in {list(shape)}")
    return torch.empty(shape, dtype=dtype, device=device)


def _meta(shape, dtype):
    return torch.empty_strided(shape, contiguous_strides(shape), dtype=dtype, device="meta")


OPS["uniform"] = define_prim(
    "uniform(SymInt[] shape, float low, float high, *, ScalarType dtype, Device device, "
    "Generator? generator=None) -> Tensor",
    PrimKind.RNG,
    meta=lambda shape, low, high, *, dtype, device, generator=None: _meta(shape, dtype),
    impl=lambda shape, low, high, *, dtype, device, generator=None: _new(
        shape, dtype, device
    ).uniform_(low, high, generator=generator),
    doc="Contiguous float tensor of independent samples from U[low, high).\n\n"
    "Draws as eager Tensor.uniform_ from generator (or device's default generator).",
)

OPS["normal"] = define_prim(
    "normal(SymInt[] shape, float mean, float std, *, ScalarType dtype, Device device, "
    "Generator? generator=None) -> Tensor",
    PrimKind.RNG,
    meta=lambda shape, mean, std, *, dtype, device, generator=None: _meta(shape, dtype),
    impl=lambda shape, mean, std, *, dtype, device, generator=None: _new(
        shape, dtype, device
    ).normal_(mean, std, generator=generator),
    doc="Contiguous float tensor of independent samples from N(mean, std^2).\n\n"
    "Draws as eager Tensor.normal_ from generator (or device's default generator).",
)

OPS["randint"] = define_prim(
    "randint(SymInt[] shape, int low, int high, *, ScalarType dtype, Device device, "
    "Generator? generator=None) -> Tensor",
    PrimKind.RNG,
    meta=lambda shape, low, high, *, dtype, device, generator=None: _meta(shape, dtype),
    impl=lambda shape, low, high, *, dtype, device, generator=None: _new(
        shape, dtype, device
    ).random_(low, high, generator=generator),
    doc="Contiguous tensor of independent integers uniform in [low, high), stored as dtype.\n\n"
    "Draws as eager Tensor.random_(low, high) from generator (or device's default generator).",
)


def _bernoulli_meta(p, *, generator=None):
    dtype_in("bernoulli", p, "float")
    return torch.empty_strided(p.shape, contiguous_strides(p.shape), dtype=p.dtype, device=p.device)


def _bernoulli_impl(p, *, generator=None):
    dtype_in("bernoulli", p, "float")
    return torch.bernoulli(p, generator=generator).contiguous()


OPS["bernoulli"] = define_prim(
    "bernoulli(Tensor p, *, Generator? generator=None) -> Tensor",
    PrimKind.RNG,
    meta=_bernoulli_meta,
    impl=_bernoulli_impl,
    doc="1 with probability p else 0, per element, in p's (float) dtype; contiguous output.\n\n"
    "p must lie in [0, 1]. Draws as eager torch.bernoulli from generator (or the default).",
)
