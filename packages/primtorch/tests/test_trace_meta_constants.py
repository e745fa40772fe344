"""An index list on a fake tensor (``x[[0, 2]]``) makes torch build the index tensor on the
meta device, without its values: tracing must refuse it, not embed a value-less constant."""

import pytest
import torch

from danlu_primtorch import trace
from danlu_primtorch.tracing.tracer import TracingError


def pick_rows(x):
    return x[[0, 2]] * 2 + 1


def test_fake_trace_refuses_a_constant_without_values():
    with pytest.raises(TracingError, match="meta device"):
        trace(pick_rows, torch.randn(4, 5))


def test_real_trace_keeps_the_index_values():
    x = torch.randn(4, 5)
    gm = trace(pick_rows, x, fake=False)
    y = torch.randn(6, 5)
    torch.testing.assert_close(gm(y), pick_rows(y), rtol=0, atol=0)
