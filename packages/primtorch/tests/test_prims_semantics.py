"""Prims' documented semantics, checked against eager torch (in float64 where precision
matters) and against Python's own arithmetic; and the explicit contract: no broadcasting, no
promotion, clear errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import danlu_primtorch
from danlu_primtorch import prims
from danlu_primtorch.prims import PRIMS, PrimArgumentError, PrimKind
from danlu_primtorch.prims.elementwise import BINARY, UNARY

G = torch.Generator().manual_seed(99)


def rnd(*shape, low=-3.0, high=3.0, dtype=torch.float32):
    return (torch.rand(shape, generator=G, dtype=torch.float64) * (high - low) + low).to(dtype)


SAFE_DOMAIN = {
    "acosh": (1.1, 4.0),
    "asin": (-0.9, 0.9),
    "acos": (-0.9, 0.9),
    "atanh": (-0.9, 0.9),
    "erfinv": (-0.9, 0.9),
    "log": (0.1, 4.0),
    "log2": (0.1, 4.0),
    "log10": (0.1, 4.0),
    "log1p": (-0.5, 4.0),
    "sqrt": (0.1, 4.0),
    "rsqrt": (0.1, 4.0),
    "lgamma": (0.1, 4.0),
    "digamma": (0.1, 4.0),
    "reciprocal": (0.5, 4.0),
    "tan": (-1.2, 1.2),
}


@pytest.mark.parametrize("name", [n for n, v in UNARY.items() if "float" in v[1]])
def test_float_unary_prims_match_eager_float64(name):
    low, high = SAFE_DOMAIN.get(name, (-3.0, 3.0))
    x = rnd(4, 6, low=low, high=high).t()  # non-contiguous float32
    got = getattr(prims, name)(x)
    want = UNARY[name][0](x.double())
    if want.dtype == torch.bool:
        assert torch.equal(got, want)
    else:
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", [n for n, v in BINARY.items() if "float" in v[1]])
def test_float_binary_prims_match_eager_float64(name):
    a, b = rnd(5, 3).t(), rnd(3, 5, low=0.5, high=2.0)
    got = getattr(prims, name)(a, b)
    want = BINARY[name][0](a.double(), b.double())
    if want.dtype == torch.bool:
        assert torch.equal(got, want)
    elif name == "nextafter":
        assert torch.equal(got, torch.nextafter(a, b))
    else:
        torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5, equal_nan=True)


def test_integer_division_family_follows_documented_rules():
    a = torch.tensor([7, -7, 7, -7, 0, 5])
    b = torch.tensor([2, 2, -2, -2, 3, 5])
    pyint = [(int(x), int(y)) for x, y in zip(a, b)]
    assert prims.div(a, b).tolist() == [int(x / y) for x, y in pyint]  # truncation
    assert prims.remainder(a, b).tolist() == [x % y for x, y in pyint]  # sign of b
    assert prims.fmod(a, b).tolist() == [int(math.fmod(x, y)) for x, y in pyint]  # sign of a


def test_round_is_half_to_even_and_sign_of_zero():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 2.4])
    assert prims.round(x).tolist() == [round(v) for v in x.tolist()]
    assert prims.sign(torch.tensor([-0.0, 3.0, -2.0])).tolist() == [0.0, 1.0, -1.0]
    assert prims.signbit(torch.tensor([-0.0, 0.0])).tolist() == [True, False]


def test_shifts_and_bitwise_ops_follow_python_ints():
    a = torch.tensor([-8, 5, 1, -1], dtype=torch.int32)
    s = torch.tensor([1, 2, 3, 0], dtype=torch.int32)
    assert prims.shift_right_arithmetic(a, s).tolist() == [
        x >> y for x, y in zip(a.tolist(), s.tolist())
    ]
    assert prims.shift_left(a, s).tolist() == [x << y for x, y in zip(a.tolist(), s.tolist())]
    assert prims.bitwise_xor(a, s).tolist() == [x ^ y for x, y in zip(a.tolist(), s.tolist())]


def test_nan_propagation_of_max_min_and_reductions():
    a = torch.tensor([1.0, float("nan"), 3.0])
    b = torch.tensor([2.0, 0.0, float("nan")])
    assert torch.isnan(prims.maximum(a, b)[1:]).all() and prims.maximum(a, b)[0] == 2.0
    assert torch.isnan(prims.amax(a, [0]))
    assert prims.argmax(torch.tensor([1.0, 5.0, 5.0, 2.0]), 0) == 1  # first occurrence


def test_elementwise_prims_refuse_broadcasting_and_promotion():
    with pytest.raises(PrimArgumentError, match="broadcast_in_dim"):
        prims.add(torch.ones(2, 3), torch.ones(3))
    with pytest.raises(PrimArgumentError, match="convert_element_type"):
        prims.add(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(PrimArgumentError, match="not supported"):
        prims.exp(torch.ones(2, dtype=torch.int64))
    # the same contract on meta tensors (what a tracer sees)
    with pytest.raises(PrimArgumentError):
        prims.mul(torch.ones(2, 3, device="meta"), torch.ones(1, 3, device="meta"))


def test_convert_element_type_semantics():
    x = torch.tensor([-1.7, -0.2, 0.0, 2.9])
    assert prims.convert_element_type(x, torch.int32).tolist() == [-1, 0, 0, 2]
    assert prims.convert_element_type(x, torch.bool).tolist() == [True, True, False, True]
    y = prims.convert_element_type(x, torch.float32)
    assert y.data_ptr() != x.data_ptr()  # always a new tensor


def test_views_alias_and_reshape_copies_only_when_needed():
    x = rnd(4, 6)
    for v in (
        prims.broadcast_in_dim(x, [2, 4, 6], [1, 2]),
        prims.permute(x, [1, 0]),
        prims.slice(x, 1, 1, 5, 2),
        prims.expand_dims(x, [0]),
        prims.squeeze(prims.expand_dims(x, [1]), [1]),
        prims.view_of(x),
        prims.as_strided(x, [3], [2], 1),
        prims.reshape(x, [24]),
    ):
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    t = prims.permute(x, [1, 0])
    copied = prims.reshape(t, [24])
    assert copied.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert torch.equal(copied, t.reshape(24))
    with pytest.raises(PrimArgumentError):
        prims.slice(x, 0, 3, 2, 1)  # start > end is refused: decompositions clamp first
    with pytest.raises(PrimArgumentError):
        prims.squeeze(x, [0])


def test_reductions_drop_dims_and_keep_dtype():
    x = torch.arange(24, dtype=torch.int32).reshape(2, 3, 4)
    s = prims.sum(x, [0, 2])
    assert s.dtype == torch.int32 and s.tolist() == x.sum((0, 2)).tolist()
    assert torch.equal(prims.sum(x, []), x)  # an empty dim list reduces nothing
    f = rnd(5, 7, dtype=torch.float64)
    torch.testing.assert_close(prims.var(f, [1], 0.0), f.var(1, correction=0))
    assert prims.prod(torch.ones(0, 3), [0]).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(PrimArgumentError, match="identity"):
        prims.amax(torch.ones(0, 3), [0])


def test_scans_sort_and_cat():
    x = rnd(4, 5)
    torch.testing.assert_close(prims.cumsum(x, 1), torch.cumsum(x.double(), 1).float())
    v, i = prims.sort(torch.tensor([3.0, float("nan"), 1.0, 3.0]), 0, False, True)
    assert v[:3].tolist() == [1.0, 3.0, 3.0] and math.isnan(v[3]) and i.tolist() == [2, 0, 3, 1]
    c = prims.cat([x, x[:2]], 0)
    assert torch.equal(c, torch.cat([x, x[:2]]))
    with pytest.raises(PrimArgumentError):
        prims.cat([x, x.double()], 0)


def test_creation_prims():
    assert prims.iota(
        5, start=2, step=3, dtype=torch.int64, device=torch.device("cpu")
    ).tolist() == [2, 5, 8, 11, 14]
    f = prims.full([2, 3], 1.5, dtype=torch.float16, device=torch.device("cpu"))
    assert f.dtype == torch.float16 and f.is_contiguous() and (f == 1.5).all()
    s = prims.scalar_tensor(7.9, dtype=torch.int32, device=torch.device("cpu"))
    assert s.dim() == 0 and s.item() == 7
    e = prims.empty_strided([2, 3], [1, 2], dtype=torch.float32, device=torch.device("cpu"))
    assert e.stride() == (1, 2)


def test_rng_prims_follow_the_generator_like_eager():
    cpu = torch.device("cpu")
    a = prims.uniform(
        [1000],
        -1.0,
        2.0,
        dtype=torch.float32,
        device=cpu,
        generator=torch.Generator().manual_seed(5),
    )
    b = torch.empty(1000).uniform_(-1.0, 2.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and a.min() >= -1.0 and a.max() < 2.0
    torch.manual_seed(11)
    n = prims.normal([4000], 1.0, 0.5, dtype=torch.float64, device=cpu)
    torch.manual_seed(11)
    assert torch.equal(n, torch.empty(4000, dtype=torch.float64).normal_(1.0, 0.5))
    assert abs(n.mean().item() - 1.0) < 0.05 and abs(n.std().item() - 0.5) < 0.05
    k = prims.randint([500], -2, 3, dtype=torch.int64, device=cpu)
    assert k.min() >= -2 and k.max() <= 2
    p = torch.tensor([0.0, 1.0, 0.0, 1.0])
    assert prims.bernoulli(p).tolist() == [0.0, 1.0, 0.0, 1.0]


def test_indexing_prims():
    a = rnd(4, 5)
    idx = torch.tensor([[0, 4], [2, 2], [1, 0], [3, 3]])
    assert torch.equal(prims.gather(a, 1, idx), torch.gather(a, 1, idx))
    i0, i1 = torch.tensor([0, 3]), torch.tensor([1, 4])
    assert torch.equal(prims.index(a, [i0, i1]), a[i0, i1])
    assert torch.equal(prims.index(a, [None, i1]), a[:, i1])
    put = prims.index_put(a, [i0, i1], torch.tensor([7.0, 8.0]), False)
    assert put[0, 1] == 7.0 and put[3, 4] == 8.0 and a[0, 1] != 7.0  # functional
    acc = prims.scatter_reduce(
        torch.zeros(3), 0, torch.tensor([0, 0, 2]), torch.tensor([1.0, 2.0, 3.0]), "sum", True
    )
    assert acc.tolist() == [3.0, 0.0, 3.0]
    with pytest.raises(PrimArgumentError, match="int64"):
        prims.index_select(a, 0, torch.tensor([0], dtype=torch.int32))


def test_pad_matches_functional_pad():
    x = rnd(2, 3, 4, 5)
    got = prims.pad(x, [0, 1, -1, 2], [1, 0, 2, -2], 0.5)
    want = F.pad(x, (2, -2, -1, 2, 1, 0, 0, 1), value=0.5)
    assert torch.equal(got, want)


def test_library_prims_match_eager():
    a, b = rnd(5, 7, dtype=torch.float64), rnd(7, 3, dtype=torch.float64)
    torch.testing.assert_close(prims.mm(a, b), a @ b)
    x, w, bias = rnd(2, 4, 9, 8), rnd(6, 2, 3, 3), rnd(6)
    got = prims.convolution(x, w, bias, [2, 1], [1, 0], [1, 2], False, [0, 0], 2)
    want = F.conv2d(x.double(), w.double(), bias.double(), (2, 1), (1, 0), (1, 2), 2)
    torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5)
    q, k, v = rnd(2, 3, 5, 8), rnd(2, 3, 6, 8), rnd(2, 3, 6, 4)
    mask = torch.rand(2, 3, 5, 6, generator=G) > 0.3
    for kwargs in (
        {"attn_mask": None, "is_causal": False},
        {"attn_mask": mask, "is_causal": False},
    ):
        out, lse = prims.scaled_dot_product_attention(
            q, k, v, kwargs["attn_mask"], kwargs["is_causal"], None
        )
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **kwargs)
        torch.testing.assert_close(out, want.float(), rtol=1e-5, atol=1e-5)
        assert lse.shape == (2, 3, 5) and lse.dtype == torch.float32
    qc = rnd(1, 2, 5, 8)
    out, _ = prims.scaled_dot_product_attention(qc, qc, qc, None, True, 0.5)
    want = F.scaled_dot_product_attention(
        qc.double(), qc.double(), qc.double(), is_causal=True, scale=0.5
    )
    torch.testing.assert_close(out, want.float(), rtol=1e-5, atol=1e-5)


def test_every_prim_kind_is_listed_in_the_registry():
    by_kind = {k: [p.name for p in prims.prims_of_kind(k)] for k in PrimKind}
    assert sum(len(v) for v in by_kind.values()) == len(PRIMS)
    assert "add" in by_kind[PrimKind.ELEMENTWISE] and "mm" in by_kind[PrimKind.LIBRARY]


def test_package_exports_prims():
    assert danlu_primtorch.prims is prims


def test_readme_table_is_the_registry_table():
    import pathlib

    from danlu_primtorch.prims.registry import format_prim_table

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    assert format_prim_table() in readme, (
        "README's prim table is stale: paste the output of python -m danlu_primtorch.prims"
    )
