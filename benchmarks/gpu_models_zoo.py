"""The GPU model suite's models: transformers and timm models built from configs (random
weights, no downloads), each wrapped so that training mode returns the loss and eval mode the
logits, at the issue's sizes or, with `small`, at tiny sizes for a CPU smoke test."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


class LanguageModelStep(nn.Module):
    """Training mode returns the language-modelling loss (labels = the inputs); eval mode returns
    the logits."""

    def __init__(self, model, seq2seq):
        super().__init__()
        self.model, self.seq2seq = model, seq2seq

    def forward(self, ids):
        kwargs = {"input_ids": ids}
        if self.seq2seq:
            kwargs["decoder_input_ids"] = ids
        if self.training:
            return self.model(**kwargs, labels=ids).loss
        return self.model(**kwargs).logits


class ClassifierStep(nn.Module):
    """Training mode returns the cross-entropy loss against `labels`; eval mode the logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images, labels):
        logits = self.model(images)
        if self.training:
            return nn.functional.cross_entropy(logits, labels)
        return logits


@dataclass
class ModelSpec:
    name: str
    family: str  # the package it needs
    build: Callable  # build(small) -> (module, make_inputs(generator) -> tuple, info)
    listed: bool = True  # False: only for --selfcheck


def _language_model(config_name, model_name, sizes, seq2seq=False):
    """sizes: {"full": (config, (batch, seq)), "small": (config, (batch, seq))}."""

    def build(small, layers=None):
        import transformers

        cfg, (batch, seq) = sizes["small" if small else "full"]
        if layers is not None:  # the same blocks, fewer of them (memory checks at full width)
            key = "n_layer" if "n_layer" in cfg else "num_hidden_layers"
            key = "num_layers" if "num_layers" in cfg else key
            cfg = {**cfg, key: layers}
        config = getattr(transformers, config_name)(**cfg)
        if hasattr(config, "use_cache"):
            config.use_cache = False  # no key/value cache objects among the outputs
        model = getattr(transformers, model_name)(config)
        vocab = config.vocab_size

        def make_inputs(gen):
            return (torch.randint(0, vocab, (batch, seq), generator=gen),)

        info = {"class": model_name, "batch": batch, "seq": seq, "config": cfg}
        return LanguageModelStep(model, seq2seq), make_inputs, info

    return build


def _timm_model(name, small_kwargs):
    def build(small):
        import timm

        batch, res = (2, 64) if small else (64, 224)
        info = {"class": f"timm {name}", "batch": batch, "resolution": res}
        try:  # the same architecture, shallower and narrower (timm's constructor arguments)
            kwargs = small_kwargs if small else {}
            model = timm.create_model(name, pretrained=False, num_classes=1000, **kwargs)
            info["overrides"] = kwargs
        except TypeError as e:  # an older timm without these arguments: its default size
            info["overrides"] = f"none ({e})"
            kwargs = {"img_size": res} if name.startswith("vit") else {}
            model = timm.create_model(name, pretrained=False, num_classes=1000, **kwargs)

        def make_inputs(gen):
            images = torch.randn(batch, 3, res, res, generator=gen)
            return images, torch.randint(0, 1000, (batch,), generator=gen)

        return ClassifierStep(model), make_inputs, info

    return build


def _torchvision_model(name):
    def build(small):
        import torchvision

        batch, res = (2, 64) if small else (64, 224)
        model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
        for m in model.modules():  # eager, compiled and float64 runs: the same function
            if isinstance(m, torchvision.ops.StochasticDepth):
                m.p = 0.0
        # torchvision's constructors have no depth arguments: the small size is the full
        # architecture on small images (its windows and shifts still take every code path)
        info = {"class": f"torchvision {name}", "batch": batch, "resolution": res}

        def make_inputs(gen):
            images = torch.randn(batch, 3, res, res, generator=gen)
            return images, torch.randint(0, 1000, (batch,), generator=gen)

        return ClassifierStep(model), make_inputs, info

    return build


def _selfcheck_mlp(small):
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.GELU(), nn.Linear(32, 1000))

    def make_inputs(gen):
        return torch.randn(4, 3, 8, 8, generator=gen), torch.randint(0, 1000, (4,), generator=gen)

    return ClassifierStep(model), make_inputs, {"class": "MLP", "batch": 4}


_GPT2 = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
_BERT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_LLAMA = dict(attention_dropout=0.0)
_T5 = dict(dropout_rate=0.0)
SPECS = [
    ModelSpec(
        "gpt2",
        "transformers",
        _language_model(
            "GPT2Config",
            "GPT2LMHeadModel",
            {
                "full": (
                    dict(_GPT2, n_layer=12, n_embd=768, n_head=12, vocab_size=50257),
                    (8, 512),
                ),
                "small": (
                    dict(_GPT2, n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128),
                    (2, 32),
                ),
            },
        ),
    ),
    ModelSpec(
        "bert",
        "transformers",
        _language_model(
            "BertConfig",
            "BertForMaskedLM",
            {
                "full": (
                    dict(
                        _BERT,
                        vocab_size=30522,
                        hidden_size=768,
                        num_hidden_layers=12,
                        num_attention_heads=12,
                        intermediate_size=3072,
                        max_position_embeddings=512,
                    ),
                    (16, 512),
                ),
                "small": (
                    dict(
                        _BERT,
                        vocab_size=512,
                        hidden_size=64,
                        num_hidden_layers=2,
                        num_attention_heads=4,
                        intermediate_size=256,
                        max_position_embeddings=128,
                    ),
                    (2, 32),
                ),
            },
        ),
    ),
    ModelSpec(
        "llama",
        "transformers",
        _language_model(
            "LlamaConfig",
            "LlamaForCausalLM",
            {
                "full": (
                    dict(
                        _LLAMA,
                        vocab_size=32000,
                        hidden_size=1024,
                        intermediate_size=2816,
                        num_hidden_layers=8,
                        num_attention_heads=16,
                        num_key_value_heads=4,  # grouped-query attention, as LLaMA 2/3
                        max_position_embeddings=2048,
                    ),
                    (8, 1024),
                ),
                "small": (
                    dict(
                        _LLAMA,
                        vocab_size=512,
                        hidden_size=64,
                        intermediate_size=176,
                        num_hidden_layers=2,
                        num_attention_heads=4,
                        num_key_value_heads=2,
                        max_position_embeddings=128,
                    ),
                    (2, 32),
                ),
            },
        ),
    ),
    ModelSpec(
        "qwen2",
        "transformers",
        _language_model(
            "Qwen2Config",
            "Qwen2ForCausalLM",
            {
                "full": (
                    dict(
                        _LLAMA,
                        vocab_size=32000,
                        hidden_size=896,
                        intermediate_size=4864,
                        num_hidden_layers=8,
                        num_attention_heads=14,
                        num_key_value_heads=2,
                        max_position_embeddings=2048,
                        tie_word_embeddings=True,
                    ),
                    (8, 1024),
                ),
                "small": (
                    dict(
                        _LLAMA,
                        vocab_size=512,
                        hidden_size=64,
                        intermediate_size=176,
                        num_hidden_layers=2,
                        num_attention_heads=4,
                        num_key_value_heads=2,
                        max_position_embeddings=128,
                        tie_word_embeddings=True,
                    ),
                    (2, 32),
                ),
            },
        ),
        listed=False,  # in --models by name and in the memory check; not in "all" yet
    ),
    ModelSpec(
        "t5",
        "transformers",
        _language_model(
            "T5Config",
            "T5ForConditionalGeneration",
            {
                "full": (
                    dict(
                        _T5,
                        vocab_size=32128,
                        d_model=512,
                        d_kv=64,
                        d_ff=2048,
                        num_layers=6,
                        num_decoder_layers=6,
                        num_heads=8,
                    ),
                    (8, 512),
                ),
                "small": (
                    dict(
                        _T5,
                        vocab_size=512,
                        d_model=64,
                        d_kv=16,
                        d_ff=256,
                        num_layers=2,
                        num_decoder_layers=2,
                        num_heads=4,
                    ),
                    (2, 32),
                ),
            },
            seq2seq=True,
        ),
    ),
    ModelSpec(
        "resnet50",
        "timm",
        _timm_model(
            "resnet50", dict(layers=(1, 1, 1, 1), channels=(16, 32, 64, 128), stem_width=16)
        ),
    ),
    ModelSpec(
        "vit_base_patch16_224",
        "timm",
        _timm_model("vit_base_patch16_224", dict(img_size=64, depth=2, embed_dim=64, num_heads=4)),
    ),
    ModelSpec(
        "convnext_tiny",
        "timm",
        _timm_model("convnext_tiny", dict(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128))),
    ),
    ModelSpec("swin_t", "torchvision", _torchvision_model("swin_t"), listed=False),
    ModelSpec("selfcheck_mlp", "torch", _selfcheck_mlp, listed=False),
]
MODELS = {s.name: s for s in SPECS}
GROUPS = {
    "all": [s.name for s in SPECS if s.listed],
    "transformers": [s.name for s in SPECS if s.listed and s.family == "transformers"],
    "timm": [s.name for s in SPECS if s.listed and s.family == "timm"],
}


def missing_dependency(spec: ModelSpec) -> str | None:
    if importlib.util.find_spec(spec.family) is None:
        return f"{spec.family} is not installed in this Python (skipped, not failed)"
    return None
