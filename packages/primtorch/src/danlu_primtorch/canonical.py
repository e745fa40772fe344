"""The canonical ATen set: the functional ATen ops a backend receives when it prefers ATen to prims.

Think of it as "what a loop-level compiler lowers directly". Every op here is

* functional: no in-place variant, no ``out=`` variant, no aliasing except the listed views
  (which a compiler turns into index arithmetic, never into writes);
* not composite: each one is a single loop nest, a reduction, a view, or a call a compiler
  hands to an external kernel (matmul, convolution, attention, sort);
* named by its ``OpOverload`` (not the packet), so ``add.Tensor`` is canonical while
  ``add.Scalar`` (rewritten to ``add.Tensor``) and ``add_.Tensor`` are not.

Everything else in ATen either decomposes to this set (``decomposition_table("canonical")``)
or is reported as not handled by ``python -m danlu_primtorch.coverage``.

The set is written as groups of ``"packet.overload"`` names, each with the reason it is in.
An overload name that does not exist in the installed torch is an error at import time
(see ``_resolve``), so a typo can never silently shrink the set.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# --- Pointwise math. One loop, one output element per input element (after broadcasting).
# .Tensor overloads accept Python numbers too (they arrive as wrapped-number tensors), so the
# .Scalar spellings of arithmetic are decomposed to them; comparisons keep both spellings
# because the dispatcher itself produces eq.Scalar & co. for `x == 2`.
POINTWISE_UNARY = (
    "abs.default neg.default sign.default signbit.default sgn.default reciprocal.default "
    "exp.default exp2.default expm1.default log.default log2.default log10.default "
    "log1p.default sqrt.default rsqrt.default "
    "sin.default cos.default tan.default asin.default acos.default atan.default "
    "sinh.default cosh.default tanh.default asinh.default acosh.default atanh.default "
    "sigmoid.default erf.default erfc.default erfinv.default lgamma.default digamma.default "
    "i0.default floor.default ceil.default trunc.default round.default round.decimals "
    "bitwise_not.default logical_not.default isnan.default isinf.default"
)
POINTWISE_BINARY = (
    "add.Tensor sub.Tensor mul.Tensor div.Tensor div.Tensor_mode "
    "remainder.Tensor fmod.Tensor pow.Tensor_Tensor pow.Tensor_Scalar pow.Scalar "
    "atan2.default hypot.default copysign.Tensor nextafter.default "
    "maximum.default minimum.default fmax.default fmin.default "
    "bitwise_and.Tensor bitwise_or.Tensor bitwise_xor.Tensor "
    "bitwise_left_shift.Tensor bitwise_right_shift.Tensor "
    "logical_and.default logical_or.default logical_xor.default "
    "eq.Tensor ne.Tensor lt.Tensor le.Tensor gt.Tensor ge.Tensor "
    "eq.Scalar ne.Scalar lt.Scalar le.Scalar gt.Scalar ge.Scalar"
)
# --- Selection and casts: still one loop each.
SELECT_AND_CAST = "where.self _to_copy.default clone.default copy.default"

# --- Reductions a compiler emits as one reduction loop (var via Welford, arg* as paired
# value/index reductions). Everything else (mean, std, logsumexp, norm, max.dim, ...) is
# written from these.
REDUCTIONS = (
    "sum.dim_IntList prod.dim_int amax.default amin.default var.correction "
    "argmax.default argmin.default any.dims all.dims"
)
# --- Scans and sorts: not expressible as one pointwise/reduction loop; compilers use a scan
# template or an external kernel.
SCANS_AND_SORTS = "cumsum.default cumprod.default sort.default sort.stable topk.default"

# --- Views: pure index arithmetic on the same storage.
VIEWS = (
    "view.default permute.default expand.default slice.Tensor select.int "
    "unsqueeze.default squeeze.dims as_strided.default alias.default"
)
# --- Data movement a compiler lowers as indexed loads/stores.
DATA_MOVEMENT = (
    "cat.default constant_pad_nd.default gather.default "
    "scatter.src scatter.value scatter_add.default scatter_reduce.two "
    "index.Tensor index_put.default index_select.default"
)
# --- External kernels: matmul, convolution and attention are not loop-fused, they are called.
EXTERN_KERNELS = (
    "mm.default bmm.default addmm.default convolution.default convolution_backward.default "
    "_scaled_dot_product_flash_attention_for_cpu.default "
    "_scaled_dot_product_flash_attention_for_cpu_backward.default "
    "_scaled_dot_product_efficient_attention.default "
    "_scaled_dot_product_efficient_attention_backward.default "
    "_scaled_dot_product_flash_attention.default "
    "_scaled_dot_product_flash_attention_backward.default"
)
# --- Creation: a fill, a strided allocation, and an iota.
CREATION = "full.default empty_strided.default arange.start_step scalar_tensor.default"
# --- Randomness. Dropout is NOT canonical: native_dropout decomposes to rand + compare +
# mul, so a compiler fuses the mask into its neighbours and only has to implement RNG.
RANDOM = "rand.default rand.generator randn.default randn.generator randint.low bernoulli.default"
# --- Leaving the graph: reading a scalar back to Python (data-dependent control flow).
SCALAR_READ = "_local_scalar_dense.default"

CANONICAL_GROUPS: dict[str, str] = {
    "pointwise unary": POINTWISE_UNARY,
    "pointwise binary": POINTWISE_BINARY,
    "selection and casts": SELECT_AND_CAST,
    "reductions": REDUCTIONS,
    "scans and sorts": SCANS_AND_SORTS,
    "views": VIEWS,
    "data movement": DATA_MOVEMENT,
    "extern kernels": EXTERN_KERNELS,
    "creation": CREATION,
    "random": RANDOM,
    "scalar read": SCALAR_READ,
}


def _resolve(name: str) -> torch._ops.OpOverload:
    packet_name, overload_name = name.split(".")
    packet = getattr(aten, packet_name)  # raises if the op does not exist
    return getattr(packet, overload_name)


CANONICAL_BY_GROUP: dict[str, frozenset[torch._ops.OpOverload]] = {
    group: frozenset(_resolve(n) for n in names.split())
    for group, names in CANONICAL_GROUPS.items()
}

#: Every canonical ATen overload.
CANONICAL_OPS: frozenset[torch._ops.OpOverload] = frozenset().union(*CANONICAL_BY_GROUP.values())

#: Their packets, for quick "is this family canonical at all" questions (not a membership test:
#: ``aten.add`` is here because ``add.Tensor`` is canonical, yet ``add.Scalar`` is not).
CANONICAL_PACKETS: frozenset[torch._ops.OpOverloadPacket] = frozenset(
    getattr(aten, op.__name__.split(".")[0]) for op in CANONICAL_OPS
)


def is_canonical(op: object) -> bool:
    """True for a canonical ATen ``OpOverload`` (packets and other callables are never canonical)."""
    return op in CANONICAL_OPS


def canonical_group(op: torch._ops.OpOverload) -> str | None:
    """The group an overload belongs to (``"reductions"``, ...), or None if not canonical."""
    for group, ops in CANONICAL_BY_GROUP.items():
        if op in ops:
            return group
    return None
