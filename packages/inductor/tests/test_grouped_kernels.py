"""Grouped kernels (codegen/triton/grouped.py): what may join one, and the option. The grouped
kernel's values are checked under the Triton interpreter and its sm_90 build ahead of time
(triton_cases.py's ``grouped_input_kernels``: five kernels of graph inputs, one launch)."""

from __future__ import annotations

from danlu_inductor.codegen.triton.backend import TritonKernelArtifact
from danlu_inductor.codegen.triton.grouped import compose
from danlu_inductor.options import validate_options

_CAST = """@triton.jit
def k(in_ptr0, out_ptr1, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < {n}
    tmp0 = tl.load(in_ptr0 + xindex, xmask, other=0)
    tl.store(out_ptr1 + xindex, tmp0.to(tl.bfloat16), {mask})
"""
_SIG = {"in_ptr0": "*fp32", "out_ptr1": "*bf16", "xnumel": "i32", "XBLOCK": "constexpr"}


def _cast(n, mask="xmask", kind="pointwise", params=("a", "b")):
    src = _CAST.format(n=n, mask=mask)
    return TritonKernelArtifact("k", src, list(params), False, kind, n, 1, dict(_SIG), [])


def test_members_take_consecutive_ranges_of_programs():
    art = compose("g", [_cast(130), _cast(6144, params=("c", "d"))])
    assert art is not None and art.params == ["a", "b", "c", "d"]
    src = art.source
    assert "if pid < ((130 + XBLOCK - 1) // XBLOCK):" in src
    assert "elif pid < ((130 + XBLOCK - 1) // XBLOCK) + ((6144 + XBLOCK - 1) // XBLOCK):" in src
    # each member's names are its own, its program id relative to its range
    assert "m1_xoffset = (pid - (130 + XBLOCK - 1) // XBLOCK) * XBLOCK" in src
    assert "'combo_numels': [130, 6144]" in src
    assert list(art.signature)[:4] == ["m0_in_ptr0", "m0_out_ptr1", "m1_in_ptr0", "m1_out_ptr1"]


def test_what_cannot_join():
    assert compose("g", [_cast(8), _cast(8, kind="persistent_reduction")]) is None
    # a size read at run time, a second grid axis
    assert compose("g", [_cast(8), _cast(8, mask="xindex < xnumel")]) is None
    two_d = _cast(8)
    two_d.source = two_d.source.replace("tl.program_id(0)", "tl.program_id(1)")
    assert compose("g", [_cast(8), two_d]) is None


def test_the_option_is_off_by_default():
    assert validate_options({}).group_input_kernels is False
    assert validate_options({"group_input_kernels": True}).group_input_kernels is True
