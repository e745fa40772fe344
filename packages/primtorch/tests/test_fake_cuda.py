"""A fake CUDA device on a machine without CUDA: factories, ops, backward."""

import pytest
import torch

from danlu_primtorch import FakeTensor, FakeTensorMode

CUDA0 = torch.device("cuda", 0)


def test_factories_on_fake_cuda():
    with FakeTensorMode():
        for make in (
            lambda: torch.empty(2, 3, device="cuda"),
            lambda: torch.zeros(2, 3, device="cuda"),
            lambda: torch.ones(2, 3, device="cuda", dtype=torch.float16),
            lambda: torch.randn(2, 3, device="cuda"),
            lambda: torch.rand(2, 3, device=torch.device("cuda")),
            lambda: torch.arange(6, device="cuda").view(2, 3),
            lambda: torch.full((2, 3), 7.0, device="cuda"),
            lambda: torch.empty_strided((2, 3), (1, 2), device="cuda"),
            lambda: torch.tensor([[1.0, 2, 3], [4, 5, 6]], device="cuda"),
            lambda: torch.as_tensor([[1, 2, 3], [4, 5, 6]], device="cuda"),
        ):
            t = make()
            assert isinstance(t, FakeTensor)
            assert t.device == CUDA0 and t.is_cuda and not t.is_cpu
            assert t.shape == (2, 3)


def test_ops_and_device_rules_on_fake_cuda():
    with FakeTensorMode():
        a = torch.randn(4, 8, device="cuda")
        b = torch.randn(8, 2, device="cuda")
        c = (a @ b).relu() + torch.tensor(1.0)  # CPU scalar mixes in
        assert c.device == CUDA0 and c.shape == (4, 2)
        assert a.new_zeros(3).device == CUDA0
        assert torch.empty_like(a).device == CUDA0
        assert a.cpu().device == torch.device("cpu")
        assert a.to("cuda").device == CUDA0
        cpu = torch.randn(4, 8)
        assert cpu.cuda().device == CUDA0
        with pytest.raises(RuntimeError, match="same device"):
            a + cpu


def test_backward_on_fake_cuda():
    with FakeTensorMode():
        lin = torch.nn.Linear(8, 4).to("cuda")
        assert lin.weight.device == CUDA0
        x = torch.randn(3, 8, device="cuda", requires_grad=True)
        loss = lin(x).tanh().sum()
        loss.backward()
        assert lin.weight.grad.device == CUDA0 and lin.weight.grad.shape == (4, 8)
        (gx,) = torch.autograd.grad(lin(x).sum(), x)
        assert gx.device == CUDA0 and gx.shape == x.shape
