"""Benchmark cases: micro kernels and models, each in inference and training form.

Sizes follow the device: small on a 2-core CPU, the issue's sizes on a GPU.
"""

from __future__ import annotations

import torch
from harness import Case
from torch import nn


class LayerNormCase(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(x)


class SoftmaxCase(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 0.125, dim=-1)


class GeluMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class AttentionBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        att = att.masked_fill(
            torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf")
        )
        y = att.softmax(-1) @ v
        return x + self.proj(y.transpose(1, 2).reshape(b, t, d))


def micro(device: str) -> list[Case]:
    gpu = device == "cuda"
    rows, d = (8192, 1024) if gpu else (2048, 256)
    b, t, dm = (8, 512, 768) if gpu else (4, 64, 128)
    cases = [
        Case("layernorm", lambda: LayerNormCase(d), lambda: (torch.randn(rows, d),)),
        Case("softmax", lambda: SoftmaxCase(), lambda: (torch.randn(rows, d),)),
        Case("gelu_mlp", lambda: GeluMLP(dm), lambda: (torch.randn(b, t, dm),)),
        Case(
            "attention",
            lambda: AttentionBlock(dm, 8 if gpu else 4),
            lambda: (torch.randn(b, t, dm),),
        ),
    ]
    return cases + [Case(c.name, c.make_model, c.make_inputs, train=True) for c in cases]


# Dropout off in every model: eager, torch.compile and danlu then compute the same function,
# so one float64 reference judges all three (the PT2 rule), and no one draws masks.
NO_DROPOUT = {
    "GPT2Config": dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "BertConfig": dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "T5Config": dict(dropout_rate=0.0),
    "LlamaConfig": dict(attention_dropout=0.0),
    "ViTConfig": dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "MobileNetV2Config": dict(classifier_dropout_prob=0.0),
}


def _hf(config_name, model_name, **cfg):
    def make():
        import transformers

        config = getattr(transformers, config_name)(**cfg, **NO_DROPOUT.get(config_name, {}))
        model = getattr(transformers, model_name)(config)
        if hasattr(model.config, "use_cache"):
            model.config.use_cache = False
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        return model

    return make


def _tokens(batch, seq, vocab, labels=True):
    def make():
        ids = torch.randint(0, vocab, (batch, seq))
        return (ids,) if not labels else (ids, None, ids)

    return make


class LMWrapper(nn.Module):
    """Calls a transformers model with input_ids and labels, returns the loss or the logits."""

    def __init__(self, model, with_labels):
        super().__init__()
        self.model, self.with_labels = model, with_labels

    def forward(self, ids):
        if self.with_labels:
            return self.model(input_ids=ids, labels=ids).loss
        return self.model(input_ids=ids).logits


class Seq2SeqWrapper(LMWrapper):
    def forward(self, ids):
        if self.with_labels:
            return self.model(input_ids=ids, decoder_input_ids=ids, labels=ids).loss
        return self.model(input_ids=ids, decoder_input_ids=ids).logits


class ImageWrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels):
        return self.model(pixel_values=pixels).logits


def models(device: str) -> list[Case]:
    gpu = device == "cuda"
    vocab = 50257 if gpu else 1024
    if gpu:
        gpt2 = dict(n_layer=12, n_embd=768, n_head=12, vocab_size=vocab, n_positions=1024)
        bert = dict(
            vocab_size=30522,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
        )
        llama = dict(
            vocab_size=32000,
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=8,
            num_attention_heads=16,
            num_key_value_heads=16,
            max_position_embeddings=2048,
        )
        t5 = dict(
            vocab_size=32128,
            d_model=512,
            d_ff=2048,
            num_layers=6,
            num_decoder_layers=6,
            num_heads=8,
        )
        shapes = dict(gpt2=(8, 512), bert=(16, 512), llama=(8, 1024), t5=(8, 512), img=64)
    else:
        gpt2 = dict(
            n_layer=2,
            n_embd=128,
            n_head=4,
            vocab_size=vocab,
            n_positions=256,
            bos_token_id=0,
            eos_token_id=0,
        )
        bert = dict(
            vocab_size=vocab,
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=512,
        )
        llama = dict(
            vocab_size=vocab,
            hidden_size=128,
            intermediate_size=344,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=256,
        )
        t5 = dict(
            vocab_size=vocab,
            d_model=128,
            d_ff=512,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            d_kv=32,
        )
        shapes = dict(gpt2=(4, 64), bert=(4, 64), llama=(4, 64), t5=(4, 64), img=2)
    cases = []
    lms = [
        ("gpt2", "GPT2Config", "GPT2LMHeadModel", gpt2, LMWrapper),
        ("bert", "BertConfig", "BertForMaskedLM", bert, LMWrapper),
        ("llama", "LlamaConfig", "LlamaForCausalLM", llama, LMWrapper),
        ("t5", "T5Config", "T5ForConditionalGeneration", t5, Seq2SeqWrapper),
    ]
    for name, cfg_cls, model_cls, cfg, wrap in lms:
        b, t = shapes[name]
        v = cfg["vocab_size"]
        for train in (False, True):
            make = _hf(cfg_cls, model_cls, **cfg)
            cases.append(
                Case(
                    name,
                    (lambda make=make, wrap=wrap, train=train: wrap(make(), train)),
                    (lambda b=b, t=t, v=v: (torch.randint(0, v, (b, t)),)),
                    train=train,
                )
            )
    nb, res = shapes["img"], 224
    images = [
        (
            "resnet",
            "ResNetConfig",
            "ResNetForImageClassification",
            dict(num_labels=1000)
            if gpu
            else dict(
                embedding_size=32,
                hidden_sizes=[32, 64, 128, 256],
                depths=[1, 1, 1, 1],
                num_labels=10,
            ),
        ),
        (
            "mobilenet_v2",
            "MobileNetV2Config",
            "MobileNetV2ForImageClassification",
            dict(num_labels=1000) if gpu else dict(depth_multiplier=0.35, num_labels=10),
        ),
        (
            "vit",
            "ViTConfig",
            "ViTForImageClassification",
            dict(num_labels=1000)
            if gpu
            else dict(
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=512,
                image_size=64,
                patch_size=16,
                num_labels=10,
            ),
        ),
    ]
    for name, cfg_cls, model_cls, cfg in images:
        size = cfg.get("image_size", res) if not gpu else res
        size = 64 if (not gpu and name != "vit") else size
        for train in (False, True):
            make = _hf(cfg_cls, model_cls, **cfg)
            cases.append(
                Case(
                    name,
                    (lambda make=make: ImageWrapper(make())),
                    (lambda size=size: (torch.randn(nb, 3, size, size),)),
                    train=train,
                )
            )
    return cases


class VisionWrapper(nn.Module):
    """A torchvision/timm classifier called on images; training returns a scalar loss."""

    def __init__(self, model, train):
        super().__init__()
        self.model, self.train_loss = model, train

    def forward(self, images):
        logits = self.model(images)
        return logits.logsumexp(-1).mean() if self.train_loss else logits


def _vision(lib, name, **kwargs):
    def make():
        if lib == "timm":
            import timm

            model = timm.create_model(name, pretrained=False, **kwargs)
        else:
            import torchvision

            model = getattr(torchvision.models, name)(weights=None, **kwargs)
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
            if hasattr(m, "drop_prob"):  # timm's DropPath
                m.drop_prob = 0.0
        return model

    return make


def cpu_models(device: str) -> list[Case]:
    """The CPU model set of issue 20: small real models at batch 2, inference and training."""
    lm = dict(vocab_size=1024)
    lms = [
        ("gpt2", "GPT2Config", "GPT2LMHeadModel", dict(lm, n_layer=2, n_embd=128, n_head=4)),
        (
            "bert",
            "BertConfig",
            "BertForMaskedLM",
            dict(lm, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=512),
        ),
        (
            "t5",
            "T5Config",
            "T5ForConditionalGeneration",
            dict(lm, d_model=128, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=4,
                 d_kv=32),
        ),
        (
            "llama",
            "LlamaConfig",
            "LlamaForCausalLM",
            dict(lm, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2),
        ),
    ]  # fmt: skip
    cases = []
    for name, cfg_cls, model_cls, cfg in lms:
        wrap = Seq2SeqWrapper if name == "t5" else LMWrapper
        for train in (False, True):
            make = _hf(cfg_cls, model_cls, **cfg)
            cases.append(
                Case(
                    name,
                    (lambda make=make, wrap=wrap, train=train: wrap(make(), train)),
                    (lambda: (torch.randint(0, 1024, (2, 64)),)),
                    train=train,
                )
            )
    vit_cfg = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=512, image_size=64, patch_size=16)  # fmt: skip
    vision = [
        ("vit", _hf("ViTConfig", "ViTForImageClassification", **vit_cfg), 64, True),
        ("resnet18", _vision("torchvision", "resnet18"), 224, False),
        ("mobilenet_v3_small", _vision("torchvision", "mobilenet_v3_small"), 224, False),
        ("convnext_atto", _vision("timm", "convnext_atto"), 224, False),
        ("vit_tiny", _vision("timm", "vit_tiny_patch16_224"), 224, False),
        ("mobilevitv2", _vision("timm", "mobilevitv2_050"), 256, False),
    ]
    for name, make, size, hf in vision:
        for train in (False, True):
            if hf:
                model = lambda make=make: ImageWrapper(make())  # noqa: E731
            else:
                model = lambda make=make, train=train: VisionWrapper(make(), train)  # noqa: E731
            cases.append(
                Case(name, model, (lambda size=size: (torch.randn(2, 3, size, size),)), train)
            )
    return cases


def get(suite: str, device: str) -> list[Case]:
    if suite == "micro":
        return micro(device)
    if suite == "models":
        return models(device)
    if suite == "cpu10":
        return cpu_models(device)
    return micro(device) + models(device)
