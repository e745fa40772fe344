"""Every prim: its meta function agrees with its eager reference on shape, dtype, strides,
storage offset (views), aliasing and device, on random inputs in several memory layouts."""

from __future__ import annotations

import pytest
import torch
from _prim_samples import prim_samples

from danlu_primtorch.prims import PRIMS, PrimKind

VIEW_KINDS = (PrimKind.VIEW,)


def to_meta(x):
    if isinstance(x, torch.Tensor):
        storage = x.untyped_storage().nbytes() // x.element_size()
        base = torch.empty(max(storage, 1), dtype=x.dtype, device="meta")
        return base.as_strided(x.shape, x.stride(), x.storage_offset())
    if isinstance(x, (list, tuple)):
        return type(x)(to_meta(v) for v in x)
    return x


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _significant_strides(t):
    # a size-1 dim's stride never affects addressing; eager itself is not consistent there
    return tuple(s if n != 1 else None for n, s in zip(t.shape, t.stride()))


def _check_same_layout(name, ref, meta, exact_strides=True):
    assert tuple(meta.shape) == tuple(ref.shape), (name, meta.shape, ref.shape)
    assert meta.dtype == ref.dtype, (name, meta.dtype, ref.dtype)
    if ref.numel() > 1:
        got = meta.stride() if exact_strides else _significant_strides(meta)
        want = ref.stride() if exact_strides else _significant_strides(ref)
        assert got == want, f"{name}: meta strides {meta.stride()} != reference {ref.stride()}"


@pytest.mark.parametrize("name", list(PRIMS))
def test_meta_matches_reference(name):
    info = PRIMS[name]
    samples = prim_samples(info)
    assert samples, f"no samples for {name}"
    for args, kwargs in samples:
        if info.kind is PrimKind.RNG:
            ref = info.op(*args, **kwargs, generator=torch.Generator().manual_seed(0))
        else:
            ref = info.op(*args, **kwargs)
        meta_args, meta_kwargs = to_meta(args), to_meta(kwargs)
        direct = info.meta(*meta_args, **meta_kwargs)
        for r, m in zip(_outputs(ref), _outputs(direct), strict=True):
            assert m.device.type == "meta"
            _check_same_layout(name, r, m, exact_strides=info.kind is not PrimKind.VIEW)
            if r.device != torch.device("cpu"):
                raise AssertionError(f"{name}: reference left the CPU")
        if info.kind is PrimKind.VIEW:
            ref_out = _outputs(ref)[0]
            m = _outputs(direct)[0]
            aliases = ref_out.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr()
            if aliases:
                assert ref_out.stride() == m.stride() or ref_out.numel() <= 1, name
                assert ref_out.storage_offset() == m.storage_offset(), name
            else:  # reshape that had to copy: the meta result must not claim a view
                assert name == "reshape" and m.stride() == torch.empty(m.shape).stride()
        # through the dispatcher on meta tensors (not possible for pure factories)
        if any(isinstance(a, torch.Tensor) for a in args) or name == "cat":
            via_op = info.op(*meta_args, **meta_kwargs)
            for m1, m2 in zip(_outputs(direct), _outputs(via_op), strict=True):
                assert m1.shape == m2.shape and m1.stride() == m2.stride() and m1.dtype == m2.dtype


@pytest.mark.parametrize("name", list(PRIMS))
def test_docstring_states_semantics(name):
    info = PRIMS[name]
    assert len(info.doc) > 20 and info.summary, name
    assert info.op.__doc__ == info.doc


def test_registry_is_small_and_complete():
    import danlu_primtorch.prims as prims

    assert len(PRIMS) <= 150
    kinds = {k: [p.name for p in PRIMS.values() if p.kind is k] for k in PrimKind}
    assert all(kinds.values()), {k: v for k, v in kinds.items() if not v}
    for name, info in PRIMS.items():
        assert getattr(prims, name) is info.op
        assert info.op is getattr(torch.ops.danlu_prims, name).default
        assert prims.is_prim(info.op)
    assert not prims.is_prim(torch.ops.aten.add.Tensor)
