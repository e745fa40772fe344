"""A model whose forward takes a Python int, over a stream of values of that int.

The model is a small causal transformer that attends over the last ``n`` positions of its input
(``forward(x, n)``: the window ``n`` is an int argument, as a cache length or a window size
often is). Ways, each timed against eager on the same stream:

- ``danlu static``: ``danlu.compile(model, dynamic=False)`` with the recompile limit above the
  number of distinct values: one compile per value;
- ``danlu dynamic``: ``danlu.compile(model)`` (automatic dynamic): static first, then once with
  ``n`` (and the sizes that follow from it) symbolic;
- ``torch.compile``: torch's default (its automatic dynamic also covers ints).

Reported: captured graphs, compile time (the first pass minus a steady pass), the wall time of
the first pass over the stream, and the steady throughput as a speedup over eager; every output
is checked against eager.

    python benchmarks/dynamic_int_args.py [--requests 24] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch


class WindowBlock(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(att.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(x)


class WindowModel(torch.nn.Module):
    def __init__(self, width=128, heads=4, layers=2, vocab=1000):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList(WindowBlock(width, heads) for _ in range(layers))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens, n):
        x = self.embed(tokens[:, -n:])  # the last n positions
        for block in self.blocks:
            x = block(x)
        return self.head(x[:, -1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--repeat", type=int, default=5, help="steady passes (median)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import danlu

    torch.manual_seed(args.seed)
    model = WindowModel().eval()
    rng = random.Random(args.seed)
    tokens = torch.randint(0, 1000, (4, 256))
    ns = [rng.randint(8, 256) for _ in range(args.requests)]
    danlu.config.recompile_limit = max(danlu.config.recompile_limit, len(set(ns)) + 2)
    graphs = {"danlu static": [], "danlu dynamic": []}

    def counting(name):
        def backend(gm, example_inputs):
            graphs[name].append(gm)
            return danlu.backends.lookup_backend("inductor")(gm, example_inputs)

        return backend

    ways = {
        "eager": model,
        "danlu static": danlu.compile(model, backend=counting("danlu static"), dynamic=False),
        "danlu dynamic": danlu.compile(model, backend=counting("danlu dynamic")),
        "torch.compile": torch.compile(model),
    }
    with torch.no_grad():
        expected = [model(tokens, n) for n in ns]
        first, steady = {}, {}
        for name, f in ways.items():
            start = time.perf_counter()
            for n, ref in zip(ns, expected):
                torch.testing.assert_close(f(tokens, n), ref, rtol=1e-4, atol=1e-4)
            first[name] = time.perf_counter() - start
        for name in ways:
            steady[name] = []
        for _ in range(args.repeat):
            for name, f in ways.items():  # interleaved
                start = time.perf_counter()
                for n in ns:
                    f(tokens, n)
                steady[name].append(time.perf_counter() - start)
    eager = statistics.median(steady["eager"])
    print(
        f"{args.requests} requests, {len(set(ns))} distinct window sizes in [8, 256], batch 4; "
        f"steady: median of {args.repeat} passes"
    )
    print("| way | graphs captured | first pass s | compile s (first - steady) | speedup |")
    print("|---|---|---|---|---|")
    for name in ways:
        s = statistics.median(steady[name])
        count = len(graphs[name]) if name in graphs else "-"
        compile_s = "-" if name == "eager" else f"{first[name] - s:.1f}"
        print(f"| {name} | {count} | {first[name]:.1f} | {compile_s} | {eager / s:.2f}x |")


if __name__ == "__main__":
    main()
