"""A library kernel whose real output layout differs from what its meta function planned:
the kernels after it must still read the right values (cuDNN attention on CUDA does this)."""

import pytest
import torch
from helpers import check_same

_LIB = torch.library.Library("danlu_layout_test", "DEF")
_LIB.define("scaled_colmajor(Tensor x) -> Tensor")


def _real(x):  # the real kernel returns a column-major result
    out = torch.empty_strided(x.shape, (1, x.shape[0]), dtype=x.dtype, device=x.device)
    return out.copy_(x * 2)


def _meta(x):  # ...where its meta function promises a row-major one
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_LIB.impl("scaled_colmajor", _real, "CPU")
_LIB.impl("scaled_colmajor", _meta, "Meta")


@pytest.mark.parametrize("shape", [(5, 7), (16, 3), (1, 9)])
def test_fallback_output_with_an_unplanned_layout(shape):
    op = torch.ops.danlu_layout_test.scaled_colmajor.default

    def fn(x, y):
        z = op(x + 1)
        return z.t().reshape(-1) * y.reshape(-1), z.sum(1)

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(shape, generator=gen)
    y = torch.randn(shape[::-1], generator=gen)
    check_same(fn, x, y)
