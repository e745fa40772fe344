"""The host time of one call of a symbolic graph, beside eager's: a small BERT encoder
(launch- and host-bound sizes) compiled with automatic dynamic shapes, called after two
other lengths made the sequence length symbolic, then timed at a third length (best of 7
rounds of 100 calls, no grad).

    python benchmarks/probes/symbolic_call_host.py --layers 4 --hidden 64
"""

from __future__ import annotations

import argparse
import time

import torch


def best_us(fn, rounds=7, calls=100):
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    import transformers

    import danlu

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=1000,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=2 * args.hidden,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = transformers.BertModel(cfg).eval().to(args.device)
    compiled = danlu.compile(model)
    ids = {n: torch.randint(0, 1000, (1, n), device=args.device) for n in (9, 13, 17)}
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        for n in (9, 13, 17, 17):
            compiled(input_ids=ids[n])
        sync()
        ours = best_us(lambda: compiled(input_ids=ids[17]))
        sync()
        eager = best_us(lambda: model(input_ids=ids[17]))
        sync()
    print(f"symbolic danlu call {ours:.0f} us, eager {eager:.0f} us ({args.device})")


if __name__ == "__main__":
    main()
