"""Find where danlu.compile's result for a suite model first disagrees with eager.

Builds a model of the GPU suite (benchmarks/gpu_models_zoo.py), optionally with fewer layers,
runs it eagerly, in float64 and through danlu.compile (inference, bf16 autocast by default),
prints the root-mean-square errors against float64, and, when danlu's result fails, bisects
each ATen graph with danlu.accuracy.find_divergence and writes the report and the failing
prefix's generated code to --out.

    python benchmarks/accuracy_bisect.py --model llama --layers 2 --device cuda --out /tmp/bisect
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_models_zoo  # noqa: E402


def build(name, layers, seq, batch):
    spec = next(s for s in gpu_models_zoo.SPECS if s.name == name)
    module, make_inputs, info = spec.build(False)
    cfg = module.model.config
    if layers is not None:
        cfg.num_hidden_layers = layers
        module = type(module)(type(module.model)(cfg), module.seq2seq)
    gen = torch.Generator().manual_seed(0)
    (ids,) = make_inputs(gen)
    ids = ids[:batch, :seq] if (seq or batch) else ids
    return module.eval(), (ids,), info


def rmse(a, ref):
    return float((a.double() - ref.double()).pow(2).mean().sqrt())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="llama")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-autocast", action="store_true")
    p.add_argument("--out", default="/tmp/danlu-bisect")
    p.add_argument("--tol", type=float, default=0.05)
    p.add_argument("--force", action="store_true", help="bisect even when the result passes")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import danlu
    import danlu.accuracy as acc

    model, inputs, info = build(args.model, args.layers, args.seq, args.batch)
    dev = torch.device(args.device)
    model = model.to(dev)
    inputs = tuple(x.to(dev) for x in inputs)
    ref_model = copy.deepcopy(model).double()
    autocast = (
        contextlib.nullcontext()
        if args.no_autocast
        else torch.autocast(dev.type, dtype=torch.bfloat16)
    )
    with torch.no_grad():
        ref = ref_model(*inputs)
        with autocast:
            eager = model(*inputs)
            graphs = acc.record_graphs(model, inputs)
            danlu.reset()
            compiled = danlu.compile(model)(*inputs)
    result = {
        "model": args.model,
        "shape": list(inputs[0].shape),
        "layers": args.layers,
        "eager_rmse": rmse(eager, ref),
        "danlu_rmse": rmse(compiled, ref),
        "max_diff_vs_eager": float((compiled.double() - eager.double()).abs().max()),
        "graphs": [],
    }
    print(json.dumps(result), flush=True)
    if args.force or result["danlu_rmse"] > 3 * result["eager_rmse"] + 1e-3:
        for i, g in enumerate(graphs):
            report = acc.find_divergence(g.gm, g.inputs, tol=args.tol)
            print(f"graph {i} ({g.kind}): {report}", flush=True)
            entry = {"kind": g.kind, "report": str(report), "node": report.node}
            if report.node is not None:
                node = next(n for n in g.gm.graph.nodes if n.name == report.node)
                sub = acc.prefix_graph(g.gm, node)
                import danlu_inductor

                c = danlu_inductor.compile_fx(sub, g.inputs)
                lines = [str(n.format_node()) for n in g.gm.graph.nodes]
                k = [n.name for n in g.gm.graph.nodes].index(report.node)
                entry["context"] = lines[max(0, k - 25) : k + 3]
                with open(os.path.join(args.out, f"graph{i}_prefix_kernels.py"), "w") as f:
                    f.write(str(getattr(c, "kernel_source", "")))
                    f.write("\n\n# ---- wrapper\n")
                    f.write(str(getattr(c, "wrapper_source", "")))
                print("\n".join(entry["context"]), flush=True)
            result["graphs"].append(entry)
    with open(os.path.join(args.out, f"bisect_{args.model}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
