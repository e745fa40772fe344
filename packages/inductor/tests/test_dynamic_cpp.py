"""Dynamic shapes, C++ backend: graphs traced with symbolic sizes (danlu-primtorch's
``trace(..., dynamic=...)``) compile once and serve every size the trace's guards accept.

Each case traces at one size, compiles, then runs many other sizes (odd ones included)
against eager, and checks that no kernel was compiled after the first build.
"""

from __future__ import annotations

import pytest
import torch

from danlu_inductor import compile_fx
from danlu_inductor.codegen.cpp import compiler


def _trace(fn, args, dynamic=True):
    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    with torch.no_grad():
        return trace(fn, *args, decompositions=decomposition_table(), dynamic=dynamic)


def _builds():
    return compiler.CompileStats.hits + compiler.CompileStats.misses


def _check(fn, make_args, sizes, dynamic=True, rtol=1.3e-6, atol=1e-5, max_fallbacks=0):
    """Trace at ``sizes[0]``, compile, run every size; returns the compiled graph."""
    torch.manual_seed(len(sizes) * 7919 + sum(map(sum, sizes)))
    args = make_args(*sizes[0])
    gm = _trace(fn, args, dynamic)
    compiled = compile_fx(gm, args)
    assert compiled.report.get("fallback_reason") is None, compiled.report
    assert compiled.report["dynamic"], "the graph should have been compiled symbolically"
    assert compiled.report["fallback_calls"] <= max_fallbacks, compiled.report["fallback_ops"]
    builds = _builds()
    env = gm.meta["shape_env"]
    for size in sizes:
        args = make_args(*size)
        values = {}
        for i, a in enumerate(args):
            for d in range(a.dim()):
                values[f"arg{i}.size({d})"] = a.size(d)
                values[f"arg{i}.stride({d})"] = a.stride(d)
        assert env.evaluate_guards(values), (size, env.failed_guards(values))
        with torch.no_grad():
            expected = fn(*args)
        got = compiled(*args)
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    assert _builds() == builds, "a new size must not compile anything"
    return compiled


SIZES_3D = [(3, 5, 7), (4, 6, 9), (2, 11, 3), (5, 2, 16), (7, 3, 33), (2, 2, 2)]


def test_pointwise_broadcast_and_kernel_arguments():
    def fn(x, y):
        return (x * 2).sin() + y, torch.where(x > y, x, y * 3)

    c = _check(fn, lambda a, b, n: (torch.randn(a, b, n), torch.randn(n)), SIZES_3D)
    assert "int64_t s" in c.kernel_source  # sizes are kernel arguments, not constants
    assert "s0 = arg0.size(0)" in c.wrapper_source


def test_non_contiguous_inputs():
    def fn(x, y):
        return x.exp() * y + 1, x.sum(0)

    def make(a, b):
        return torch.randn(b, a).t(), torch.randn(a, b * 2)[:, ::2]

    _check(fn, make, [(3, 5), (4, 9), (6, 2), (17, 3), (2, 31)])


@pytest.mark.parametrize(
    "name",
    ["sum", "mean", "amax", "argmax", "softmax", "log_softmax", "layer_norm", "var", "sum0"],
)
def test_reductions(name):
    fns = {
        "sum": lambda x: x.sum(-1),
        "sum0": lambda x: x.sum(0) + x.sum((0, 1)).unsqueeze(0),
        "mean": lambda x: x.mean(1),
        "amax": lambda x: x.amax(-1) - x.amin(0).sum(),
        "argmax": lambda x: x.argmax(-1),
        "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: torch.log_softmax(x, 1),
        "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
        "var": lambda x: x.var(-1) + x.std(1, correction=0).sum(),
    }
    fn = fns[name]
    _check(fn, lambda a, b, n: (torch.randn(a, b, n),), SIZES_3D, rtol=1e-5, atol=1e-5)


def test_long_symbolic_reduction():
    # rows longer than the hint: the accumulator and the loop bound come from the sizes
    def fn(x):
        return x.sum(-1), torch.softmax(x, -1)

    sizes = [(3, 40), (2, 5000), (5, 20001), (9, 7)]
    _check(fn, lambda a, n: (torch.randn(a, n),), sizes, rtol=1e-5, atol=1e-4)


def test_views_reshape_slice_cat_expand():
    def fn(x, y):
        a = x.reshape(-1, x.shape[-1]).t()  # [n, a*b]
        b = x.permute(2, 0, 1).reshape(x.shape[2], -1)  # needs a real copy
        c = x[:, 1:-1, ::2]
        d = torch.cat([x, y.expand(x.shape[0], x.shape[1], -1)], dim=2)
        return a * 2, b + 1, c.sum(1), d.mean(0), x.view(x.shape[0], -1).sum(1)

    def make(a, b, n):
        return torch.randn(a, b, n), torch.randn(1, 1, n)

    _check(fn, make, [(3, 5, 7), (4, 6, 9), (2, 11, 3), (5, 3, 16), (2, 4, 2)])


def test_matmul_extern_and_mlp():
    def fn(x, w1, b1, w2):
        h = torch.nn.functional.gelu(x @ w1 + b1)
        return torch.softmax(h @ w2, -1)

    def make(a, n):
        return torch.randn(a, n), torch.randn(n, 8), torch.randn(8), torch.randn(8, 5)

    c = _check(
        fn,
        make,
        [(4, 6), (3, 9), (17, 2), (64, 33), (2, 5)],
        dynamic=[True, [0], False, False],
        rtol=1e-4,
        atol=1e-5,
    )
    assert c.report["extern_calls"] == 2


def test_arange_full_and_size_arithmetic():
    def fn(x):
        n = x.shape[-1]
        pos = torch.arange(n, dtype=torch.int64)
        return x * pos + x.new_full((x.shape[0], n), 0.5) * (n * 2), x / n

    _check(fn, lambda a, n: (torch.randn(a, n),), [(3, 5), (4, 9), (6, 2), (2, 30), (5, 5)])


def test_kernel_source_is_shared_across_trace_sizes(tmp_path, monkeypatch):
    """The kernel source is the symbolic form: traced at two sizes it is the same text, so
    the second compile is a cache hit (no C++ build)."""
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))

    def fn(x):
        return torch.softmax(x.tanh() * 3, -1) + x.mean(0)

    first = compile_fx(_trace(fn, [torch.randn(4, 9)]), [torch.randn(4, 9)])
    misses = compiler.CompileStats.misses
    hits = compiler.CompileStats.hits
    second = compile_fx(_trace(fn, [torch.randn(7, 3)]), [torch.randn(7, 3)])
    assert second.kernel_source == first.kernel_source
    assert compiler.CompileStats.misses == misses and compiler.CompileStats.hits == hits + 1
    for a, n in [(2, 2), (3, 17), (11, 4), (6, 100), (9, 9)]:
        x = torch.randn(a, n)
        torch.testing.assert_close(second(x), fn(x))


def test_static_graphs_unchanged():
    def fn(x):
        return torch.softmax(x, -1) * 2

    x = torch.randn(4, 9)
    gm = _trace(fn, [x], dynamic=False)
    c = compile_fx(gm, [x])
    assert not c.report["dynamic"]
    assert "int64_t s" not in c.kernel_source and "9" in c.kernel_source
    torch.testing.assert_close(c(x), fn(x))


def test_unbindable_size_runs_eagerly_and_says_why():
    """A symbol that no input exposes as a plain size cannot be read at run time: the graph
    runs eagerly (correct results) and the report names the reason."""
    from danlu_primtorch import FakeTensorMode

    real = torch.randn(6, 4)
    gm = _trace(lambda x: x * 2, [real])
    env = gm.meta["shape_env"]
    s0, s1 = sorted(env.var_to_val, key=str)
    ph = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with FakeTensorMode(shape_env=env):  # as if only 2*s0 were visible
        ph.meta["val"] = torch.empty(env.symint(2 * s0), env.symint(s1))
    c = compile_fx(gm, [real])
    assert "cannot be read" in (c.report.get("fallback_reason") or ""), c.report
    y = torch.randn(10, 3)
    torch.testing.assert_close(c(y), y * 2)


def test_gathers_padding_and_aten_fallbacks_with_symbolic_sizes():
    """embedding/pad lower symbolically; max_pool2d (lowered for static windows only) and
    chunk run as ATen fallbacks whose outputs the trace describes."""

    def fn(w, idx, img):
        e = torch.nn.functional.embedding(idx, w)
        p = torch.nn.functional.max_pool2d(img, 2)
        pad = torch.nn.functional.pad(img, (1, 2)).sum(-1)
        return e.sum(1), p * 2, pad, img.flatten(1).chunk(2, 1)[0].sum(1)

    def make(v, n, b, h):
        return torch.randn(v, 6), torch.randint(0, v, (b, n)), torch.randn(b, 3, h, h + 2)

    # trace sizes all distinct (equal sizes would share a symbol: duck sizing)
    c = _check(
        fn,
        make,
        [(11, 5, 4, 8), (13, 7, 2, 6), (30, 3, 5, 12), (9, 2, 7, 4), (12, 9, 2, 10)],
        max_fallbacks=2,
    )
    assert "aten.max_pool2d_with_indices.default" in c.report["fallback_ops"]


def test_cudagraphs_option_skips_symbolic_graphs():
    def fn(x):
        return x.relu() + 1

    x = torch.randn(4, 9)
    c = compile_fx(_trace(fn, [x]), [x], options={"cudagraphs": True})
    assert c.report["cudagraphs"].startswith("skipped: symbolic sizes"), c.report
    y = torch.randn(6, 5)
    torch.testing.assert_close(c(y), fn(y))


def test_floor_division_sizes_are_computed_by_the_wrapper():
    """Pooling output sizes floor-divide expressions the ranges cannot prove non-negative:
    the wrapper computes them (Python semantics) and the kernels receive them as sizes."""

    def fn(x):
        p = torch.nn.functional.max_pool2d(x, 4, 2)
        return p.sum(-1) * 2, torch.nn.functional.max_pool2d(x, 3, 2, ceil_mode=True) + 1

    c = _check(
        fn,
        lambda a, b, h, w: (torch.randn(a, b, h, w),),
        [(2, 3, 10, 13), (3, 2, 6, 7), (2, 5, 17, 8), (4, 3, 9, 6), (2, 2, 9, 30)],
        max_fallbacks=2,
    )
    assert "# floor division, in Python" in c.wrapper_source
