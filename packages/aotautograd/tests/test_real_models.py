"""Real models from transformers (small configs, random weights, no downloads): a training step
through aot_eager / aot_module matches eager, dropout included."""

import copy

import pytest
import torch
import transformers  # noqa: E402  (declared in the test extra)

import danlu_aotautograd as da


def gpt2():
    config = transformers.GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_size=100,
        n_positions=32,
        eos_token_id=0,
        bos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (2, 12))
    return model, {"input_ids": ids, "labels": ids}


def bert():
    config = transformers.BertConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
        num_labels=3,
    )
    model = transformers.BertForSequenceClassification(config)
    inputs = {
        "input_ids": torch.randint(0, 100, (2, 12)),
        "token_type_ids": torch.randint(0, 2, (2, 12)),
        "labels": torch.randint(0, 3, (2,)),
    }
    return model, inputs


def resnet():
    config = transformers.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=4, layer_type="basic"
    )
    model = transformers.ResNetForImageClassification(config)
    return model, {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.randint(0, 4, (2,))}


def _train_step_matches(build, wrap, steps=2):
    torch.manual_seed(0)
    model, inputs = build()
    model.train()
    twin = copy.deepcopy(model)
    compiled = wrap(twin)
    opt_e = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_c = torch.optim.SGD(twin.parameters(), lr=0.05)
    for step in range(steps):
        torch.manual_seed(100 + step)
        loss_e = model(**inputs).loss
        torch.manual_seed(100 + step)
        loss_c = compiled(**inputs).loss
        torch.testing.assert_close(loss_c, loss_e, atol=1e-5, rtol=1e-5)
        loss_e.backward()
        loss_c.backward()
        for (name, pe), (_, pc) in zip(model.named_parameters(), twin.named_parameters()):
            if pe.grad is None:
                assert pc.grad is None, name
            else:
                torch.testing.assert_close(pc.grad, pe.grad, atol=2e-5, rtol=1e-4, msg=name)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    for (name, be), (_, bc) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(bc, be, msg=name)
    return compiled


@pytest.mark.parametrize("build", [gpt2, bert, resnet], ids=["gpt2", "bert", "resnet"])
def test_training_step_aot_module(build):
    compiled = _train_step_matches(build, lambda m: da.aot_module(m, da.run_graph))
    partition = compiled.aot.compiled[0].partition
    assert partition is not None and partition.saved_bytes > 0


def test_gpt2_through_aot_function_over_a_model_call():
    torch.manual_seed(0)
    model, inputs = gpt2()
    names = [n for n, _ in model.named_parameters()]

    def loss_fn(params, input_ids):
        state = dict(zip(names, params))
        return torch.func.functional_call(model, state, (input_ids,), {"labels": input_ids}).loss

    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    compiled = da.aot_function(loss_fn, da.run_graph)
    torch.manual_seed(5)
    loss_c = compiled(params, inputs["input_ids"])
    loss_c.backward()
    torch.manual_seed(5)
    loss_e = model(**inputs).loss
    loss_e.backward()
    torch.testing.assert_close(loss_c, loss_e)
    for p, (name, q) in zip(params, model.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=2e-5, rtol=1e-4, msg=name)


def test_resnet_eval_inference_matches():
    torch.manual_seed(0)
    model, inputs = resnet()
    model.eval()
    compiled = da.aot_module(copy.deepcopy(model), da.run_graph)
    with torch.no_grad():
        expected = model(pixel_values=inputs["pixel_values"]).logits
        actual = compiled(pixel_values=inputs["pixel_values"]).logits
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("build", [gpt2, resnet], ids=["gpt2", "resnet"])
def test_torch_compile_with_aot_eager_trains(build):
    compilations = []

    def counting(gm, example_inputs):
        compilations.append(gm)
        return gm

    backend = da.aot_backend(counting)
    _train_step_matches(build, lambda m: torch.compile(m, backend=backend))
    assert compilations, "torch.compile never handed a graph to the backend"


def test_torch_compile_with_the_aot_eager_backend_object():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.BatchNorm1d(16),
        torch.nn.GELU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(16, 4),
    )
    twin = copy.deepcopy(model)
    compiled = torch.compile(twin, backend=da.aot_eager)
    opt_e = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(twin.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(6, 8)
        torch.manual_seed(step)
        le = model(x).pow(2).mean()
        torch.manual_seed(step)
        lc = compiled(x).pow(2).mean()
        torch.testing.assert_close(lc, le)
        le.backward()
        lc.backward()
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(b, a, msg=name)


def test_min_cut_saves_fewer_bytes_than_default_on_gpt2_block():
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=64, n_head=4, n_positions=32)
    block = GPT2Block(config, layer_idx=0).train()
    x = torch.randn(2, 32, 64, requires_grad=True)
    saved, grads = {}, {}
    for pf in (da.default_partition, da.min_cut_partition):
        compiled = da.aot_module(copy.deepcopy(block), da.run_graph, partition_fn=pf)
        torch.manual_seed(1)
        out = compiled(x)
        out = out[0] if isinstance(out, tuple) else out
        (g,) = torch.autograd.grad(out.pow(2).sum(), x)
        grads[pf.__name__] = g
        saved[pf.__name__] = compiled.aot.compiled[0].partition.saved_bytes
    torch.manual_seed(1)
    out = block(x)
    out = out[0] if isinstance(out, tuple) else out
    (expected,) = torch.autograd.grad(out.pow(2).sum(), x)
    for g in grads.values():
        torch.testing.assert_close(g, expected, atol=1e-5, rtol=1e-4)
    assert saved["min_cut_partition"] < saved["default_partition"]
