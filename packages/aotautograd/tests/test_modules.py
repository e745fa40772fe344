"""aot_module against eager on nn.Modules: parameters and buffers as inputs, buffer updates,
train/eval, dropout."""

import copy

import pytest
import torch
import torch.nn as nn

import danlu_aotautograd as da

PARTITIONERS = [da.default_partition, da.min_cut_partition]


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8, momentum=0.3)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


class Block(nn.Module):
    """Pre-norm transformer block: LayerNorm, attention, dropout, GELU MLP."""

    def __init__(self, d=32, heads=4, p=0.1):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = self.drop(att.masked_fill(~mask, float("-inf")).softmax(-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)))))


def _compare(model, inputs, partition_fn, steps=2, atol=1e-5, rtol=1e-5):
    eager = model
    compiled_model = copy.deepcopy(model)
    compiled = da.aot_module(compiled_model, da.run_graph, partition_fn=partition_fn)
    for step in range(steps):
        seed = 1000 + step
        torch.manual_seed(seed)
        out_e = eager(*inputs)
        torch.manual_seed(seed)
        out_c = compiled(*inputs)
        torch.testing.assert_close(out_c, out_e, atol=atol, rtol=rtol)
        if out_e.requires_grad:
            w = torch.randn_like(out_e)
            (out_e * w).sum().backward()
            (out_c * w).sum().backward()
        for (name, pe), (_, pc) in zip(eager.named_parameters(), compiled_model.named_parameters()):
            if pe.grad is not None:
                torch.testing.assert_close(pc.grad, pe.grad, atol=atol, rtol=rtol, msg=name)
        for (name, be), (_, bc) in zip(eager.named_buffers(), compiled_model.named_buffers()):
            torch.testing.assert_close(bc, be, atol=atol, rtol=rtol, msg=name)
    return compiled


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_conv_batchnorm_train_updates_running_stats(partition_fn):
    torch.manual_seed(0)
    model = ConvBN().train()
    x = torch.randn(4, 3, 12, 12)
    compiled = _compare(model, [x], partition_fn)
    assert model.bn2.num_batches_tracked.item() == 2
    assert compiled.aot.compiled[0].program.written_inputs  # running stats come back out


def test_backward_allocates_no_zeros_for_updated_buffers():
    # batch norm returns its running statistics as outputs nothing differentiates; autograd
    # would hand the backward a zeros tensor for each (a launch each on a GPU)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        calls: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append(str(func))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = ConvBN().train()
    compiled = da.aot_module(model, da.run_graph)
    out = compiled(torch.randn(4, 3, 12, 12))
    with Count() as c:
        out.sum().backward()
    assert not [f for f in c.calls if "zeros" in f or "fill" in f]
    assert model.conv1.weight.grad is not None


def test_cumulative_batchnorm_reads_tensor_data_clear_error():
    # momentum=None divides by float(num_batches_tracked): data the tracer does not see
    model = nn.BatchNorm1d(4, momentum=None)
    with pytest.raises(da.AotNotSupported, match="needs tensor data"):
        da.aot_module(model, da.run_graph)(torch.randn(3, 4))


def test_conv_batchnorm_eval_and_inference():
    torch.manual_seed(1)
    model = ConvBN()
    x = torch.randn(2, 3, 10, 10)
    model.train()
    for _ in range(2):
        model(x)
    model.eval()
    compiled = _compare(model, [x], da.min_cut_partition)
    assert not compiled.aot.compiled[0].program.written_inputs  # eval: stats untouched
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.aot.compiled[-1].partition is None


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_transformer_block_with_dropout(partition_fn):
    torch.manual_seed(2)
    model = Block().train()
    x = torch.randn(3, 10, 32, requires_grad=True)
    _compare(model, [x], partition_fn, steps=3)


def test_transformer_block_float64_reference():
    torch.manual_seed(3)
    model = Block(p=0.0).double()
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    _compare(model, [x], da.min_cut_partition, atol=1e-11, rtol=1e-11)


def test_min_cut_saves_no_more_than_default_on_block():
    torch.manual_seed(4)
    x = torch.randn(2, 16, 32)
    saved = {}
    for pf in PARTITIONERS:
        model = Block(p=0.0)
        compiled = da.aot_module(model, da.run_graph, partition_fn=pf)
        compiled(x).sum().backward()
        saved[pf.__name__] = compiled.aot.compiled[0].partition.saved_bytes
    assert saved["min_cut_partition"] < saved["default_partition"]


def test_optimizer_style_update_of_parameters():
    def sgd_step(params, grads, lr: float):
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.add_(g, alpha=-lr)
        return None

    params = [torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
    grads = [torch.randn(4, 3), torch.randn(3)]
    expected = [p.detach() - 0.1 * g for p, g in zip(params, grads)]
    step = da.aot_function(sgd_step, da.run_graph)
    assert step(params, grads, 0.1) is None
    for p, e in zip(params, expected):
        torch.testing.assert_close(p.detach(), e)
    assert params[0].requires_grad and params[0].is_leaf


def test_a_training_step_leaves_no_python_storage_objects():
    """The runtime's aliasing checks read storage addresses from the tensors: asking a saved
    value for ``untyped_storage()`` made a Python object that lived as long as the value,
    one per saved tensor per step, and the collector ran every step of a large model."""
    import gc

    torch.manual_seed(3)
    model = ConvBN().train()
    compiled = da.aot_module(model, da.run_graph, partition_fn=da.min_cut_partition)
    x = torch.randn(2, 3, 10, 10)
    compiled(x).sum().backward()  # compiles; written inputs: the running statistics
    assert compiled.aot.compiled[0].program.written_inputs

    def storages():
        return sum(type(o) is torch.UntypedStorage for o in gc.get_objects())

    before = storages()
    out = compiled(x)  # the forward's saved values are alive until the backward
    assert storages() == before
    out.sum().backward()
