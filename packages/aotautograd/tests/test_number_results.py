"""Ops whose results mix tensors and plain numbers (as CUDA flash attention returns its
maximum sequence lengths): the numbers come back as numbers, the tensors as traced values."""

import torch

import danlu_aotautograd as da


@torch.library.custom_op("danlu_aot_test::scaled_and_len", mutates_args=())
def scaled_and_len(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    return x * 2, 7


@scaled_and_len.register_fake
def _(x):
    return torch.empty_like(x), 7


def program(x):
    y, n = torch.ops.danlu_aot_test.scaled_and_len(x)
    return y.sin() * n


def test_number_among_tensor_results():
    x = torch.randn(5, 4).t()
    compiled = da.aot_function(program, da.run_graph)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), program(x), rtol=0, atol=0)
