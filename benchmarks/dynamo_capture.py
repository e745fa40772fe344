"""Graph capture on small real models: danlu_dynamo vs torch.compile's capture (reference).

For each model (forward in eval mode, and one training step's forward+loss): graph count,
graph breaks, capture time (first call, tracing only) and whether the "eager"-backend result
matches eager PyTorch bit for bit.

    python benchmarks/dynamo_capture.py [--models gpt2,bert,...] [--markdown]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import danlu_dynamo


def _tiny(name):
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, 128, (2, 16))
    if name == "gpt2":
        m = tf.GPT2LMHeadModel(
            tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64)
        )
        return m, {"input_ids": ids}, "logits"
    if name == "bert":
        cfg = tf.BertConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=128,
            vocab_size=128,
            max_position_embeddings=64,
        )
        return tf.BertModel(cfg), {"input_ids": ids}, "last_hidden_state"
    if name == "t5":
        cfg = tf.T5Config(num_layers=2, d_model=64, num_heads=4, d_kv=16, d_ff=128, vocab_size=128)
        return (
            tf.T5ForConditionalGeneration(cfg),
            {"input_ids": ids, "decoder_input_ids": ids},
            "logits",
        )
    if name == "llama":
        cfg = tf.LlamaConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            vocab_size=128,
            max_position_embeddings=64,
        )
        return tf.LlamaForCausalLM(cfg), {"input_ids": ids}, "logits"
    px = torch.randn(2, 3, 32, 32)
    if name == "resnet":
        cfg = tf.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10
        )
        return tf.ResNetForImageClassification(cfg), {"pixel_values": px}, "logits"
    if name == "mobilenetv2":
        cfg = tf.MobileNetV2Config(image_size=32, depth_multiplier=0.25, num_labels=10)
        return tf.MobileNetV2ForImageClassification(cfg), {"pixel_values": px}, "logits"
    if name == "vit":
        cfg = tf.ViTConfig(
            image_size=32,
            patch_size=8,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            num_labels=10,
        )
        return tf.ViTForImageClassification(cfg), {"pixel_values": px}, "logits"
    raise ValueError(name)


MODELS = ["gpt2", "bert", "t5", "llama", "resnet", "mobilenetv2", "vit"]


def measure(name, train=False):
    model, kwargs, key = _tiny(name)
    model.train(train)
    if train:
        torch.manual_seed(1)

    def step(m):
        out = m(**kwargs)
        v = out[key]
        return v.float().pow(2).mean() if train else v

    torch.manual_seed(2)
    ref = step(model)
    t0 = time.perf_counter()
    e = danlu_dynamo.explain(step)(model)
    ours_time = e.capture_time
    first_call = time.perf_counter() - t0
    torch.manual_seed(2)
    got = danlu_dynamo.optimize("eager")(step)(model)
    same = bool(torch.equal(ref, got))
    import torch._dynamo as td

    td.reset()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        te = td.explain(step)(model)
    torch_time = time.perf_counter() - t0
    td.reset()
    return {
        "model": name + (" (train)" if train else ""),
        "graphs": e.graph_count,
        "breaks": e.graph_break_count,
        "eager_regions": len(e.eager_regions),
        "ops": e.op_count,
        "capture_s": ours_time,
        "first_call_s": first_call,
        "bit_identical": same,
        "torch_graphs": te.graph_count,
        "torch_breaks": te.graph_break_count,
        "torch_explain_s": torch_time,
        "reasons": [str(b) for b in e.break_reasons[:5]],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--reasons", action="store_true")
    args = p.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    rows = []
    for name in args.models.split(","):
        for train in (False, True):
            r = measure(name, train)
            rows.append(r)
            print(r if not args.markdown else "", flush=True)
    if args.markdown:
        print(
            "| model | graphs | breaks | eager regions | ops | capture (s) | bit-identical | torch.compile graphs | torch.compile breaks | torch explain (s) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['model']} | {r['graphs']} | {r['breaks']} | {r['eager_regions']} | {r['ops']} | "
                f"{r['capture_s']:.2f} | {r['bit_identical']} | {r['torch_graphs']} | {r['torch_breaks']} | {r['torch_explain_s']:.2f} |"
            )
    if args.reasons:
        for r in rows:
            print(r["model"], r["reasons"])


if __name__ == "__main__":
    main()
