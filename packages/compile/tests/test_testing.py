import torch

from danlu.testing import same


def test_same_accepts_eager_level_error_and_rejects_larger():
    torch.manual_seed(1)
    x64 = torch.randn(1000, dtype=torch.float64)
    ref = x64.float()  # eager's own rounding error against float64
    close = ref + 1e-7 * torch.randn(1000)
    far = ref + 1e-1 * torch.randn(1000)
    assert same(ref, close, x64)
    assert not same(ref, far, x64)


def test_same_checks_structure_dtype_and_integers():
    a = torch.arange(6)
    assert same((a, 2.0), (a.clone(), 2.0))
    assert not same((a,), (a + 1,))
    assert not same((a,), (a, a))
    assert not same(torch.ones(3), torch.ones(3, dtype=torch.float64))
    assert not same(torch.ones(3), torch.ones(4))
