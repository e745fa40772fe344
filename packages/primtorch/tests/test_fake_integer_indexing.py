"""Integer index tensors give shapes known from metadata; only boolean masks need data."""

import pytest
import torch

from danlu_primtorch import DataDependentOutputError, FakeTensorMode


def test_integer_tensor_indexing_runs_on_fakes_with_eager_metadata():
    x = torch.randn(6, 5, 4)
    idx = torch.tensor([[0, 3], [5, 1]])
    cols = torch.tensor([4, 0, 2])
    real = [x[idx], x[:, cols], x[idx, 1:3]]
    with FakeTensorMode() as mode:
        fx, fidx, fcols = mode.from_real(x), mode.from_real(idx), mode.from_real(cols)
        fake = [fx[fidx], fx[:, fcols], fx[fidx, 1:3]]
    for fake_out, real_out in zip(fake, real):
        assert fake_out.shape == real_out.shape
        assert fake_out.dtype == real_out.dtype
        assert fake_out.stride() == real_out.stride()


def test_boolean_mask_indexing_still_needs_data():
    x = torch.randn(6, 5)
    with FakeTensorMode() as mode:
        fx = mode.from_real(x)
        with pytest.raises(DataDependentOutputError, match="boolean-mask"):
            fx[fx > 0]
