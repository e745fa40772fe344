"""Dynamic shapes on the Triton path, run in a child process by test_dynamic_triton.py.

``python triton_dynamic_cases.py cpu OUT.json`` with ``DANLU_INDUCTOR_TRITON_ON_CPU=1
TRITON_INTERPRET=1 DANLU_INDUCTOR_TRITON_CHECK_TARGET=90``: each graph is traced with symbolic
sizes, compiled once (every kernel also compiled ahead of time for sm_90), then run at several
sizes against eager; OUT.json records what was checked.
"""

from __future__ import annotations

import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))

from child_runs import record_cases  # noqa: E402


def _trace(fn, args, dynamic=True):
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    with torch.no_grad():
        return trace(fn, *args, decompositions=decomposition_table(), dynamic=dynamic)


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _kernel_state(c):
    """What would show a recompilation: the launcher objects and their AOT compile records."""
    return {name: (id(fn), len(fn.compile_info or [])) for name, fn in c.launchers.items()}


def run_case(fn, make, sizes, tol=2e-5, dynamic=True):
    from danlu_inductor import compile_fx

    torch.manual_seed(0)
    args = make(*sizes[0])
    c = compile_fx(_trace(fn, args, dynamic), args)
    assert c.report.get("backend") == "triton", c.report
    assert c.report["dynamic"], "the graph should have been compiled symbolically"
    assert not c.report.get("triton_fallbacks"), c.report["triton_fallbacks"]
    state = _kernel_state(c)
    for size in sizes:
        args = make(*size)
        got = _flat(c(*args))
        with torch.no_grad():
            expected = _flat(fn(*args))
        for g, e in zip(got, expected):
            assert g.shape == e.shape, (size, g.shape, e.shape)
            torch.testing.assert_close(g, e, rtol=tol, atol=tol, equal_nan=True)
    assert _kernel_state(c) == state, "a new size must not build kernels"
    aot = [
        {"kernel": name, "error": err, **extra}
        for name, fn in c.launchers.items()
        for _cfg, err, extra in fn.compile_info or []
    ]
    return {
        "kernels": c.report["kernels"],
        "kinds": sorted(set(c.report["kernel_kinds"].values())),
        "sizes": len(sizes),
        "symbolic_args": "i64" in c.kernel_source and "do_not_specialize" in c.kernel_source,
        "stores": c.kernel_source.count("tl.store("),
        "aten_fallbacks": c.report.get("fallback_ops") or {},
        "aot": aot,
    }


def _nc(*shape):
    *lead, last = shape
    return torch.randn(*lead, 2 * last)[..., ::2]


CASES = {
    "pointwise_broadcast_noncontiguous": (
        lambda x, b: (x * b).relu() + b.exp() - x.t().sum(0, keepdim=True).t(),
        lambda a, n: [_nc(a, n), torch.randn(n)],
        [(5, 7), (3, 2), (9, 33), (2, 17), (12, 5)],
    ),
    "softmax_layernorm_rows": (
        lambda x, w: (torch.softmax(x, -1), F.layer_norm(x, x.shape[-1:], w)),
        lambda a, n: [torch.randn(a, n), torch.randn(n)],
        [(4, 9), (3, 130), (6, 2), (2, 300), (5, 31)],
    ),
    "reductions_dim0_argmax_var": (
        lambda x: (x.sum(0), x.amax(0), x.argmax(1), x.var(1), x.mean()),
        lambda a, n: [torch.randn(a, n)],
        [(4, 9), (7, 3), (2, 40), (31, 5), (3, 3)],
    ),
    "mm_bias_gelu": (
        lambda x, w, b: F.gelu(x @ w + b).sum(-1),
        lambda a, n: [torch.randn(a, n), torch.randn(n, 6), torch.randn(6)],
        [(4, 9), (7, 3), (2, 40), (17, 5), (3, 12)],
    ),
    "views_slices_cat_arange": (
        lambda x: (
            torch.cat([x[:, 1:], x[:, :1]], 1) * torch.arange(x.shape[1]),
            x.reshape(-1) / x.shape[0],
            x.t().reshape(x.shape[1], -1).cumsum(1),
        ),
        lambda a, n: [torch.randn(a, n)],
        [(4, 9), (7, 3), (2, 40), (17, 5), (3, 12)],
    ),
    "attention_block": (
        lambda x, wqkv, g: _attention(x, wqkv, g),
        lambda b, t: [torch.randn(b, t, 16), torch.randn(16, 48) / 4, torch.randn(16)],
        [(2, 5), (3, 9), (2, 2), (4, 17), (3, 3)],
    ),
    # the normalized rows read by two matmuls as [b*t, 16]: a view of the kernel's result
    # (the symbolic reshape folds back to strides), not a copy per matmul
    "flattened_rows_two_matmuls": (
        lambda x, w1, w2: _two_linears(x, w1, w2),
        lambda b, t: [torch.randn(b, t, 16), torch.randn(16, 8), torch.randn(16, 8)],
        [(2, 5), (3, 9), (2, 2), (4, 17), (3, 3)],
    ),
    # a mixed-precision linear layer's weight (static sizes, as a module's parameters are
    # in a graph whose batch is symbolic), transposed then cast and also returned, as a
    # training forward saves it: the cast is stored in the weight's own order, which the
    # matmul and the output read transposed, no copy
    "transposed_weight_cast": (
        lambda x, w: _cast_linear(x, w),
        # small integers: every product and sum exact in bf16, whichever kernel accumulates
        lambda b, t: [
            torch.randint(-3, 4, (b, t, 16)).float(),
            torch.randint(-3, 4, (24, 16)).float(),
        ],
        [(2, 5), (3, 9), (2, 2), (4, 17), (3, 3)],
        2e-5,
        {0: True, 1: None},  # the weight static
    ),
    # CUDA attention's mask alignment: the last dim padded by 16 - n % 16 (never negative,
    # never zero) and sliced back: one fused kernel, not an ATen pad (which ran a whole
    # symbolic BERT graph eagerly on CUDA)
    "alignment_pad_of_a_mask": (
        lambda x, m: _aligned_mask_add(x, m),
        lambda b, t: [torch.randn(b, 4, t, t), torch.randn(b, 1, 1, t)],
        [(2, 5), (3, 9), (2, 16), (4, 17), (3, 3)],
    ),
}

# cases whose symbolic graph compiles to exactly this many kernels (a static one's count)
KERNEL_COUNTS = {
    "flattened_rows_two_matmuls": 2,  # the layer norm, the relu
    "transposed_weight_cast": 2,  # the two casts
    "alignment_pad_of_a_mask": 1,  # the pad, slice and add fused
}
# cases with no ATen fallback call left in the compiled graph
NO_FALLBACKS = ("alignment_pad_of_a_mask",)
# cases whose kernels store exactly this many buffers
STORE_COUNTS = {"transposed_weight_cast": 2}  # each cast once (not the weight's twice)


def _aligned_mask_add(x, m):
    t = m.shape[-1]
    mask = m.expand(-1, x.shape[1], t, t)
    padded = F.pad(mask, (0, 16 - t % 16))[..., :t]
    return (x + padded).softmax(-1)


def _cast_linear(x, w):
    wt = w.t().to(torch.bfloat16)
    return x.to(torch.bfloat16) @ wt, wt


def _two_linears(x, w1, w2):
    h = F.layer_norm(x, (16,)).reshape(-1, 16)
    return (h @ w1).relu(), h @ w2


def _attention(x, wqkv, g):
    h = F.layer_norm(x, (16,), g)
    q, k, v = (h @ wqkv).split(16, -1)
    att = torch.softmax(q @ k.transpose(1, 2) * 0.25, -1)
    return x + att @ v


def run_mlp_training():
    """Forward and backward through danlu-aotautograd with symbolic sizes."""
    import danlu_aotautograd as da
    from danlu_inductor import compile_fx
    from danlu_inductor.decompositions import decomposition_table

    compiled = []

    def compiler(gm, inputs):
        c = compile_fx(gm, inputs)
        compiled.append(c)
        return c

    def mlp(x, w1, w2):
        return torch.log_softmax(torch.tanh(x @ w1) @ w2, -1)

    f = da.aot_function(
        mlp,
        compiler,
        dynamic=lambda i, t: (0,) if i == 0 else None,
        decompositions=decomposition_table(),
    )
    for batch in (4, 7, 2, 13, 5):
        torch.manual_seed(batch)
        x = torch.randn(batch, 10)
        w1 = (torch.randn(10, 12) / math.sqrt(10)).requires_grad_()
        w2 = (torch.randn(12, 3) / math.sqrt(12)).requires_grad_()
        r1, r2 = w1.detach().clone().requires_grad_(), w2.detach().clone().requires_grad_()
        out = f(x, w1, w2)
        g = torch.randn_like(out)
        out.backward(g)
        ref = mlp(x, r1, r2)
        ref.backward(g)
        torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(w1.grad, r1.grad, rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(w2.grad, r2.grad, rtol=2e-5, atol=2e-5)
    assert f.stats["traces"] == 1, f.stats
    for c in compiled:
        assert c.report.get("backend") == "triton", c.report
        assert not c.report.get("triton_fallbacks"), c.report
    return {"graphs": len(compiled), "kernels": sum(c.report["kernels"] for c in compiled)}


def run_int_argument():
    """A captured graph whose SymInt input is an int argument, not a size of a tensor input:
    one trace and one set of Triton kernels serve every value, forward and backward."""
    import torch.fx as fx

    import danlu_aotautograd as da
    from danlu_inductor import compile_fx
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch.symbolic import ShapeEnv

    def f(x, w, n):
        return torch.tanh(x[:, :n] @ w[:n]) * n

    gm = fx.symbolic_trace(f)
    env = ShapeEnv(duck_shape=False)
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name == "n":
            node.meta["val"] = env.create_symbolic_size(5, "L['n']", duck=False)
    compiled = []

    def compiler(g, inputs):
        c = compile_fx(g, inputs)
        compiled.append(c)
        return c

    torch.manual_seed(0)
    x = torch.randn(6, 20)
    w = (torch.randn(20, 4) / math.sqrt(20)).requires_grad_()
    run = da.aot_graph(gm, [x, w, 5], compiler, decompositions=decomposition_table())
    for n in (5, 2, 11, 20, 7):
        out = run(x, w, n)
        ref_w = w.detach().clone().requires_grad_()
        ref = f(x, ref_w, n)
        (g,) = torch.autograd.grad(out.square().sum(), (w,))
        (g_ref,) = torch.autograd.grad(ref.square().sum(), (ref_w,))
        torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-4)  # sums of n * n terms
    assert run.aot_module.aot.stats["traces"] == 1, run.aot_module.aot.stats
    for c in compiled:
        assert c.report.get("backend") == "triton", c.report
        assert not c.report.get("triton_fallbacks"), c.report
    return {
        "graphs": len(compiled),
        "kernels": sum(c.report["kernels"] for c in compiled),
        "int_in_forward": "primals_int_0" in compiled[0].wrapper_source,
        "aot": [
            {"kernel": name, "error": err, **extra}
            for c in compiled
            for name, fn in c.launchers.items()
            for _cfg, err, extra in fn.compile_info or []
        ],
    }


def main(mode, out_path):
    assert mode == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"

    def run_one(name):
        if name in CASES:
            return run_case(*CASES[name])
        try:
            import danlu_aotautograd  # noqa: F401
        except ImportError:
            return {"skipped": "danlu_aotautograd not installed"}
        return run_mlp_training() if name == "mlp_training" else run_int_argument()

    record_cases([*CASES, "mlp_training", "int_argument"], run_one, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
