"""Programs traced under autocast: the graphs hold autocast's casts, so running them must not
cast again (the dtypes the compilers planned for have to hold at run time)."""

import copy

import pytest
import torch
from torch import nn

import danlu_aotautograd as da


class Block(nn.Module):
    def __init__(self, width=24):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.norm = nn.LayerNorm(2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        h = self.norm(self.up(x))  # linear runs in bf16, layer_norm in float32 under CPU autocast
        h = torch.softmax(h, dim=-1) * nn.functional.gelu(h)
        with torch.autocast("cpu", enabled=False):
            # float32 on purpose (as rotary embeddings do): autocast must not touch this matmul
            # when the graph runs
            h = h.float() @ self.down.weight.float().t()
        return h.square().mean()


@pytest.mark.parametrize("partition", [da.default_partition, da.min_cut_partition])
def test_training_step_under_cpu_autocast_matches_eager(partition):
    seed = torch.randint(0, 2**31 - 1, ()).item()
    torch.manual_seed(seed)
    model = Block()
    ref = copy.deepcopy(model)
    compiled = da.aot_module(model, da.run_graph, partition_fn=partition)
    x = torch.randn(6, 24, 5).transpose(1, 2)  # non-contiguous input
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_ref = ref(x)
            loss = compiled(x)
        loss_ref.backward()
        loss.backward()
        assert loss.dtype == loss_ref.dtype
        torch.testing.assert_close(loss, loss_ref, rtol=1e-2, atol=1e-3, msg=f"seed {seed}")
        for (name, p), q in zip(ref.named_parameters(), model.parameters()):
            if p.grad is None:  # down.bias is unused
                assert q.grad is None, name
                continue
            assert q.grad is not None and q.grad.dtype == p.grad.dtype, name
            torch.testing.assert_close(q.grad, p.grad, rtol=2e-2, atol=2e-3, msg=f"{name} {seed}")


class TwoOutputs(Block):
    def forward(self, x):
        h = self.norm(self.up(x))
        with torch.autocast("cpu", enabled=False):
            f = h.float() @ self.up.weight.float()
        return f, self.down(torch.softmax(h, dim=-1))


def test_inference_under_cpu_autocast_keeps_eager_dtypes():
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model = TwoOutputs().eval()
    compiled = da.aot_module(model, da.run_graph)
    x = torch.randn(4, 5, 24)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        got = compiled(x)
    assert [g.dtype for g in got] == [torch.float32, torch.bfloat16]
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)
