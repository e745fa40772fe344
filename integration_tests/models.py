"""Small-config models for the end-to-end tests (transformers, no downloads)."""

from __future__ import annotations

import torch
from torch import nn


def _no_cache(model):
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    return model


class LMLoss(nn.Module):
    """input_ids -> loss of a language model trained on its own inputs."""

    def __init__(self, model, seq2seq=False):
        super().__init__()
        self.model, self.seq2seq = model, seq2seq

    def forward(self, ids):
        if self.seq2seq:
            return self.model(input_ids=ids, decoder_input_ids=ids, labels=ids).loss
        return self.model(input_ids=ids, labels=ids).loss


class LMLogits(LMLoss):
    def forward(self, ids):
        if self.seq2seq:
            return self.model(input_ids=ids, decoder_input_ids=ids).logits
        return self.model(input_ids=ids).logits


class ImageLogits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels):
        return self.model(pixel_values=pixels).logits


VOCAB = 128


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return _no_cache(
        GPT2LMHeadModel(
            GPT2Config(
                n_layer=2,
                n_embd=64,
                n_head=4,
                vocab_size=VOCAB,
                n_positions=64,
                bos_token_id=0,
                eos_token_id=0,
            )
        )
    )


def bert():
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(
        BertConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
        )
    )


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return _no_cache(
        LlamaForCausalLM(
            LlamaConfig(
                vocab_size=VOCAB,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=64,
            )
        )
    )


def t5(dropout=0.1):
    from transformers import T5Config, T5ForConditionalGeneration

    return _no_cache(
        T5ForConditionalGeneration(
            T5Config(
                vocab_size=VOCAB,
                d_model=64,
                d_ff=128,
                d_kv=16,
                num_layers=2,
                num_decoder_layers=2,
                num_heads=4,
            )
        )
    )


def resnet():
    from transformers import ResNetConfig, ResNetForImageClassification

    return ResNetForImageClassification(
        ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1], num_labels=10
        )
    )


def mobilenet_v2(dropout=0.2):
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    return MobileNetV2ForImageClassification(
        MobileNetV2Config(
            depth_multiplier=0.35, num_labels=10, image_size=32, classifier_dropout_prob=dropout
        )
    )


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    return ViTForImageClassification(
        ViTConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            image_size=32,
            patch_size=8,
            num_labels=10,
        )
    )


LANGUAGE = {"gpt2": (gpt2, False), "bert": (bert, False), "llama": (llama, False), "t5": (t5, True)}
IMAGE = {"resnet": resnet, "mobilenet_v2": mobilenet_v2, "vit": vit}


def _without_dropout(factory):
    """The model with every dropout probability 0 (a float64 reference cannot share masks)."""
    kwargs = {"dropout": 0.0} if factory in (t5, mobilenet_v2) else {}
    model = factory(**kwargs)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def make(name: str, train: bool, dropout: bool = True):
    """(module, example-input factory) for a model name; the module returns loss or logits."""
    torch.manual_seed(0)
    if name in LANGUAGE:
        factory, seq2seq = LANGUAGE[name]
        wrap = LMLoss if train else LMLogits
        model = factory() if dropout else _without_dropout(factory)
        return wrap(model, seq2seq), lambda b=2, t=16: (torch.randint(0, VOCAB, (b, t)),)
    model = IMAGE[name]() if dropout else _without_dropout(IMAGE[name])
    return ImageLogits(model), lambda b=2, s=32: (torch.randn(b, 3, s, s),)
