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


def _symbolic_cuda(shape, dim):
    from danlu_primtorch.symbolic.shape_env import ShapeEnv

    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    return env, mode, torch.randn(*shape, requires_grad=True)


def test_symbolic_fake_moves_to_cuda():
    env, mode, x = _symbolic_cuda((4, 9, 8), 1)
    with mode:
        f = mode.from_real(x, dynamic_dims=[1], source="x")
        for moved in (f.to("cuda"), f.cuda(), f.to(torch.device("cuda", 0))):
            assert moved.device == CUDA0 and isinstance(moved.shape[1], torch.SymInt)
        assert f.device == torch.device("cpu")  # the input itself stays where it was


@pytest.mark.parametrize("gqa", [False, True])
def test_attention_on_symbolic_cuda_fakes_keeps_sizes_symbolic(gqa):
    # ATen picks the CUDA attention kernel from concrete sizes, which would specialise the
    # sequence length; the fake computes the output's metadata without that choice
    env, mode, x = _symbolic_cuda((2, 11, 128), 1)
    with mode:
        f = mode.from_real(x, dynamic_dims=[1], source="x").to("cuda")
        s = f.shape[1]
        q = f.view(2, s, 2, 64).transpose(1, 2)
        kv = q[:, :1] if gqa else q
        out = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=gqa)
    assert env.guards == []
    assert out.device == CUDA0 and out.requires_grad
    assert out.shape[0] == 2 and out.shape[1] == 2 and out.shape[3] == 64
    assert isinstance(out.shape[2], torch.SymInt)
    # the fused kernels' layout: [batch, seq, heads, dim] in memory
    assert out.stride()[3] == 1 and out.stride()[1] == 64 and out.stride()[2] == 128


def test_attention_kernel_choice_on_symbolic_sizes_records_no_guard():
    # the choice is made on the sizes' hints: a guard here would pin the sequence length
    env, mode, x = _symbolic_cuda((2, 11, 128), 1)
    with mode:
        f = mode.from_real(x.detach(), dynamic_dims=[1], source="x").to("cuda")
        q = f.view(2, f.shape[1], 2, 64).transpose(1, 2)
        choice = torch.ops.aten._fused_sdp_choice.default(q, q, q)
    assert isinstance(choice, int) and env.guards == []
