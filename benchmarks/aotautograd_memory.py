"""Memory saved for backward: eager vs danlu_aotautograd's default and min-cut partitioners.

A GPT-2 block (transformers GPT2Block, GPT-2 small widths) runs forward + backward three ways:
eager, aot_eager with the default partitioner, aot_eager with the min-cut partitioner. For each:

- graph bytes: the partition's own report (bytes of the values the forward graph saves);
- measured saved bytes: bytes of distinct storages kept between forward and backward
  (parameters and inputs excluded: they are alive anyway): for eager, what
  ``torch.autograd.graph.saved_tensors_hooks`` sees; for the compiled runs, what the compiled
  function's autograd node holds (its saved tensors and the intermediates it keeps);
- peak memory of forward+backward above the model and inputs (CUDA: torch.cuda memory stats;
  on CPU torch keeps no allocator statistics, so it is left out);
- step time (median of a few runs; informative only).

Reference rows: PyTorch's own AOTAutograd through ``torch.compile`` (``aot_eager``: default
partitioner; ``aot_eager_decomp_partition``: decompositions + min-cut), measured the same way.

    python benchmarks/aotautograd_memory.py [--device cuda] [--batch 4 --seq 256] [--json out]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch
import torch._dynamo

import danlu_aotautograd as da


def build_block(width: int, heads: int, seq: int):
    import transformers
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    config = transformers.GPT2Config(
        n_embd=width, n_head=heads, n_positions=seq, attn_pdrop=0.1, resid_pdrop=0.1
    )
    return GPT2Block(config, layer_idx=0).train()


class SavedCounter:
    """Distinct storages saved for backward, minus those of ``exclude`` (params, inputs)."""

    def __init__(self, exclude):
        self.exclude = {t.untyped_storage().data_ptr() for t in exclude}
        self.storages: dict[int, int] = {}

    def pack(self, t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.exclude:
            self.storages[ptr] = t.untyped_storage().nbytes()
        return t

    def add_compiled(self, out):
        """Our runtime keeps intermediates outside the hooks (so the backward can free them
        early): read them from the compiled function's autograd node."""
        stack, seen = [out.grad_fn], set()
        while stack:
            fn = stack.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            if hasattr(fn, "intermediates"):
                for t in list(fn.saved_tensors) + list(fn.intermediates or []):
                    self.pack(t)
            stack.extend(f for f, _ in fn.next_functions)

    @property
    def bytes(self) -> int:
        return sum(self.storages.values())


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def measure(name, model, x, device, partition=None, repeats=3):
    params = list(model.parameters())
    counter = SavedCounter(params + [x])
    grad_out = torch.randn_like(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with torch.autograd.graph.saved_tensors_hooks(counter.pack, lambda t: t):
        out = _first(model(x))
    counter.add_compiled(out)
    saved = counter.bytes
    out.backward(grad_out)
    peak = None
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    times = []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        start = time.perf_counter()
        _first(model(x)).backward(grad_out)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    row = {
        "variant": name,
        "measured_saved_bytes": saved,
        "peak_bytes": peak,
        "step_ms": statistics.median(times) * 1000,
    }
    if partition is not None:
        row["graph_saved_bytes"] = partition.saved_bytes
        row["graph_saved_bytes_without_inputs"] = (
            partition.saved_bytes - partition.saved_input_bytes
        )
        row["graph_saved_values"] = len(partition.saved)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-reference", action="store_true", help="skip torch.compile rows")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    block = build_block(args.width, args.heads, args.seq).to(device)
    x = torch.randn(args.batch, args.seq, args.width, device=device, requires_grad=True)

    rows = [measure("eager", copy.deepcopy(block), x, device)]
    for pf in (da.default_partition, da.min_cut_partition):
        compiled = da.aot_module(copy.deepcopy(block), da.run_graph, partition_fn=pf)
        _first(compiled(x)).sum().backward()  # compile
        partition = compiled.aot.compiled[0].partition
        rows.append(measure(f"aot_eager + {pf.__name__}", compiled, x, device, partition))

    if not args.no_reference:
        # PyTorch's own AOTAutograd (through torch.compile) as the reference point
        for backend in ("aot_eager", "aot_eager_decomp_partition"):
            torch._dynamo.reset()
            reference = torch.compile(copy.deepcopy(block), backend=backend)
            _first(reference(x)).sum().backward()
            rows.append(measure(f"torch.compile {backend} (reference)", reference, x, device))

    def mib(b):
        return "n/a" if b is None else f"{b / 2**20:.2f}"

    print(
        f"GPT-2 block: batch {args.batch}, seq {args.seq}, width {args.width}, heads "
        f"{args.heads}, {device}, torch {torch.__version__}"
    )
    print("| variant | graph saved MiB (w/o inputs) | measured saved MiB | peak MiB | step ms |")
    print("|---|---|---|---|---|")
    for r in rows:
        graph = (
            f"{mib(r['graph_saved_bytes'])} ({mib(r['graph_saved_bytes_without_inputs'])})"
            if "graph_saved_bytes" in r
            else "-"
        )
        print(
            f"| {r['variant']} | {graph} | {mib(r['measured_saved_bytes'])} | "
            f"{mib(r['peak_bytes'])} | {r['step_ms']:.1f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
