"""BERT-like inference over a stream of varying sequence lengths, three ways.

- ``recompile``: static shapes (``dynamic=False``, recompile limit raised above the number of
  lengths): every new length compiles again;
- ``pad``: each batch padded to the next power of two (attention mask zero on the padding),
  static shapes: one compile per bucket, wasted work on the padding;
- ``dynamic``: ``dynamic=None`` (automatic dynamic): the first length compiles static, the
  second compiles once with the length symbolic, later lengths reuse it.

For each: the number of compiles (captured graphs, and graphs danlu-inductor compiled), the
compile time danlu records, the wall time of the first pass over the stream (compiles
included), and the throughput of a second pass (everything compiled), against eager's on the
same stream; outputs are checked against eager for every request.

    python benchmarks/dynamic_shapes.py --device cpu --requests 24

``--profile N``: after the timed passes, cProfile over one more pass of each way, the top N
functions by own time (the host's share of a request: guards, symbol binding, launches).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import time

import torch


def build(device, layers, hidden):
    import transformers

    cfg = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return transformers.BertModel(cfg).eval().to(device)


def stream(n, batch, lo, hi, seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        seq = rng.randint(lo, hi)
        out.append(torch.randint(0, 30522, (batch, seq), generator=gen))
    return out


def next_pow2(n):
    return 1 << (n - 1).bit_length()


class Way:
    def __init__(self, name, model, device):
        import danlu

        self.name = name
        dynamic = None if name == "dynamic" else False
        self.fn = model if name == "eager" else danlu.compile(model, dynamic=dynamic)
        self.device = device

    def __call__(self, ids):
        ids = ids.to(self.device)
        if self.name != "pad":
            return self.fn(input_ids=ids).last_hidden_state
        b, s = ids.shape
        p = next_pow2(s)
        padded = torch.zeros(b, p, dtype=ids.dtype, device=ids.device)
        padded[:, :s] = ids
        mask = torch.zeros(b, p, dtype=torch.long, device=ids.device)
        mask[:, :s] = 1
        return self.fn(input_ids=padded, attention_mask=mask).last_hidden_state[:, :s]


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_pass(way, requests, device, reference=None):
    outs, t0 = [], time.perf_counter()
    with torch.no_grad():
        for ids in requests:
            outs.append(way(ids))
    sync(device)
    wall = time.perf_counter() - t0
    worst = 0.0
    if reference is not None:
        for o, r in zip(outs, reference):
            worst = max(worst, float((o.float() - r.float()).abs().max()))
    return wall, outs, worst


def print_profile(name, way, requests, device, top):
    """cProfile over one steady-state pass: where a request's host time goes."""
    prof = cProfile.Profile()
    prof.enable()
    run_pass(way, requests, device)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"==== {name}: one pass of {len(requests)} requests, by own time")
    print("\n".join(out.getvalue().splitlines()[4:]), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--min-seq", type=int, default=16)
    p.add_argument("--max-seq", type=int, default=200)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ways", default="recompile,pad,dynamic")
    p.add_argument("--out", default=None)
    p.add_argument("--repeat", type=int, default=5, help="steady-state passes (median)")
    p.add_argument("--profile", type=int, default=0, help="print the top N of a profiled pass")
    args = p.parse_args()
    import danlu

    torch.manual_seed(args.seed)
    model = build(args.device, args.layers, args.hidden)
    requests = stream(args.requests, args.batch, args.min_seq, args.max_seq, args.seed)
    lengths = sorted({r.shape[1] for r in requests})
    eager = Way("eager", model, args.device)
    run_pass(eager, requests[:2], args.device)  # warm-up
    eager_wall, reference, _ = run_pass(eager, requests, args.device)
    eager_walls = [eager_wall]
    tokens = sum(r.numel() for r in requests)
    rows = []
    default_limit = danlu.config.recompile_limit
    for name in args.ways.split(","):
        danlu.reset()
        # recompiling per shape needs a version per length: past the recompile limit the
        # frame would run eagerly (and its inner frames compile on their own)
        danlu.config.recompile_limit = len(lengths) + 8 if name == "recompile" else default_limit
        stats = danlu.CompileStats.current()
        way = Way(name, model, args.device)
        first_wall, _, err1 = run_pass(way, requests, args.device, reference)
        graphs, kernels = len(stats.graphs), len(stats.kernel_graphs)
        compile_s = stats.compile_seconds
        second_wall, _, err2 = run_pass(way, requests, args.device, reference)
        # steady state, interleaved with eager passes (the machine's load drifts)
        walls = [second_wall]
        for _ in range(args.repeat - 1):
            eager_walls.append(run_pass(eager, requests, args.device)[0])
            walls.append(run_pass(way, requests, args.device)[0])
        second_wall = statistics.median(walls)
        if args.profile:
            print_profile(name, way, requests, args.device, args.profile)
        danlu.config.recompile_limit = default_limit
        rows.append(
            {
                "way": name,
                "captured_graphs": graphs,
                "inductor_compiles": kernels,
                "recompiles_second_pass": len(stats.graphs) - graphs,
                "compile_s": round(compile_s, 1),
                "first_pass_s": round(first_wall, 2),
                "second_pass_s": round(second_wall, 3),
                "speedup_vs_eager": round(statistics.median(eager_walls) / second_wall, 2),
                "max_abs_err": max(err1, err2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    head = (
        f"{args.requests} requests, batch {args.batch}, {len(lengths)} distinct lengths in "
        f"[{lengths[0]}, {lengths[-1]}], {tokens} tokens; BERT {args.layers} layers x "
        f"{args.hidden}; device {args.device}; eager pass {statistics.median(eager_walls):.3f} s "
        f"(median of {len(eager_walls)}, {tokens / statistics.median(eager_walls):.0f} tokens/s)"
    )
    table = [
        head,
        "",
        "| way | captured graphs | inductor compiles | compile s | first pass s | "
        "later pass s (median) | speedup vs eager (later passes) | max abs err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        table.append(
            f"| {r['way']} | {r['captured_graphs']} | {r['inductor_compiles']} | "
            f"{r['compile_s']} | {r['first_pass_s']} | {r['second_pass_s']} | "
            f"{r['speedup_vs_eager']}x | {r['max_abs_err']:.2e} |"
        )
    print("\n".join(table))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "dynamic_shapes.json"), "w") as f:
            json.dump({"head": head, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
