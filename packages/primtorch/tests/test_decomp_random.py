"""Random decompositions: values differ from eager's draws, so check shapes, dtypes and distributions."""

import pytest
import torch

import danlu_primtorch

aten = torch.ops.aten
N = 200_000


@pytest.fixture(scope="module")
def table():
    return danlu_primtorch.decomposition_table("canonical")


def test_native_dropout_keeps_about_1_minus_p_and_rescales(table):
    torch.manual_seed(0)
    x = torch.randn(N, dtype=torch.float64)
    out, mask = table[aten.native_dropout.default](x, 0.3, True)
    assert out.shape == x.shape and mask.dtype == torch.bool
    keep = mask.double().mean().item()
    assert abs(keep - 0.7) < 0.01
    torch.testing.assert_close(out[mask], x[mask] / 0.7)
    assert (out[~mask] == 0).all()
    same, ones = table[aten.native_dropout.default](x, 0.3, False)
    assert torch.equal(same, x) and ones.all()


def test_native_dropout_backward_uses_the_mask(table):
    g = torch.randn(1000)
    mask = torch.rand(1000) > 0.5
    torch.testing.assert_close(
        table[aten.native_dropout_backward.default](g, mask, 2.0),
        aten.native_dropout_backward.default(g, mask, 2.0),
    )


def test_bernoulli_mean_and_dtype(table):
    torch.manual_seed(1)
    x = torch.empty(N, dtype=torch.float32)
    out = table[aten.bernoulli.p](x, 0.25)
    assert out.dtype == torch.float32 and set(out.unique().tolist()) <= {0.0, 1.0}
    assert abs(out.mean().item() - 0.25) < 0.01


@pytest.mark.parametrize("op", [aten.rand_like.default, aten.randn_like.default])
def test_like_ops_moments(table, op):
    torch.manual_seed(2)
    out = table[op](torch.empty(N, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.shape == (N,)
    if op is aten.rand_like.default:
        assert out.min() >= 0 and out.max() < 1 and abs(out.mean().item() - 0.5) < 0.01
    else:
        assert abs(out.mean().item()) < 0.01 and abs(out.std().item() - 1) < 0.01


def test_normal_and_uniform_moments(table):
    torch.manual_seed(3)
    mean = torch.full((N,), 3.0, dtype=torch.float64)
    out = table[aten.normal.Tensor_float](mean, 2.0)
    assert abs(out.mean().item() - 3) < 0.03 and abs(out.std().item() - 2) < 0.03
    u = table[aten.uniform.default](torch.empty(N, dtype=torch.float64), -2.0, 4.0)
    assert u.min() >= -2 and u.max() < 4 and abs(u.mean().item() - 1) < 0.03


def test_randint_range(table):
    torch.manual_seed(4)
    out = table[aten.randint_like.low_dtype](torch.empty(N, dtype=torch.int32), 5, 9)
    assert out.dtype == torch.int32 and out.min() == 5 and out.max() == 8
