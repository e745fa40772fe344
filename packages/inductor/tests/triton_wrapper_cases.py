"""``compile_fx`` end to end on the Triton path, run in a child process by
test_triton_wrapper.py (and by triton_gpu_check.py on a GPU).

``python triton_wrapper_cases.py cpu OUT.json``: CPU tensors with
``DANLU_INDUCTOR_TRITON_ON_CPU=1 TRITON_INTERPRET=1`` (set by the caller before triton is
imported) and ``DANLU_INDUCTOR_TRITON_CHECK_TARGET=90``, so every kernel runs in the
interpreter and also compiles ahead of time for sm_90 in the compile worker processes.
``python triton_wrapper_cases.py cuda OUT.json``: the same graphs on a GPU (plus CUDA graph
replays). Each case compares with eager (float64 reference for fp32) on non-contiguous
inputs and records what it checked in OUT.json.
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))

from child_runs import record_cases  # noqa: E402

DEVICE = "cpu"


def _nc(*shape):
    """A non-contiguous tensor of ``shape`` (every other column of a wider one)."""
    *lead, last = shape
    return torch.randn(*lead, 2 * last, device=DEVICE)[..., ::2]


def _t(*shape):
    """A transposed (column-major) tensor of ``shape``."""
    return torch.randn(*reversed(shape), device=DEVICE).t() if len(shape) == 2 else None


def _tol(dtype):
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=2e-2)
    if dtype == torch.float16:
        return dict(rtol=1e-3, atol=1e-3)
    return dict(rtol=2e-5, atol=2e-5)


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _reference(fn, inputs):
    with torch.no_grad():
        eager = _flat(fn(*inputs))
        up = [a.double() if a.dtype == torch.float32 else a for a in inputs]
        ref = _flat(fn(*up))
    return [r.to(e.dtype) for r, e in zip(ref, eager)]


def _compile(fn, inputs, options=None):
    from helpers import aten_graph

    from danlu_inductor import compile_fx

    return compile_fx(aten_graph(fn, *inputs), list(inputs), options=options)


def _check(fn, make, options=None, calls=1):
    inputs = make()
    c = _compile(fn, inputs, options)
    assert c.report.get("backend") == "triton", c.report
    assert not c.report.get("triton_fallbacks"), c.report["triton_fallbacks"]
    for k in range(calls):
        if k:
            inputs = make()
        got = _flat(c(*inputs))
        ref = _reference(fn, inputs)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype)
            assert g.device == r.device, (g.device, r.device)
            torch.testing.assert_close(g, r, equal_nan=True, **_tol(r.dtype))
    assert "fallback_reason" not in c.report, c.report["fallback_reason"]
    return c, _info(c)


def _info(c):
    info = {
        "kernels": c.report["kernels"],
        "kinds": sorted(set(c.report["kernel_kinds"].values())),
        "externs": c.report["extern_calls"],
        "fallback_ops": c.report["fallback_ops"],
    }
    aot = []
    for name, launcher in c.launchers.items():
        for _cfg, err, extra in launcher.compile_info or []:
            aot.append({"kernel": name, "error": err, **extra})
    info["aot"] = aot
    if "cudagraphs" in c.report:
        info["cudagraphs"] = c.report["cudagraphs"]
    return info


def _gelu_chain(x, y):
    return F.gelu(x * 2 + y) * torch.sigmoid(x) - (x - y).tanh()


def _attention_scores(q, k):
    return (q @ k.transpose(-2, -1) * 0.125).softmax(-1)


def _block():
    from models import TransformerBlock

    torch.manual_seed(0)
    return TransformerBlock(dim=64, heads=4, ctx=32).to(DEVICE).eval()


CASES = {
    "pointwise_chain_transposed": (_gelu_chain, lambda: [_t(48, 40), _nc(48, 40)]),
    "pointwise_broadcast_3d": (
        lambda x, b: (x * b).relu() + b.exp(),
        lambda: [torch.randn(6, 40, 20, device=DEVICE).permute(0, 2, 1), _nc(40)],
    ),
    "softmax_noncontiguous": (lambda x: torch.softmax(x, -1), lambda: [_nc(64, 130)]),
    "log_softmax_dim0": (lambda x: torch.log_softmax(x, 0), lambda: [_t(50, 20)]),
    "layernorm": (
        lambda x, w, b: F.layer_norm(x, (96,), w, b),
        lambda: [_nc(3, 40, 96), _nc(96), torch.randn(96, device=DEVICE)],
    ),
    "reductions": (
        lambda x: (x.sum(-1), x.mean(0), x.var(1), x.amax(-1), x.argmax(0), x.std(-1)),
        lambda: [_t(37, 53)],
    ),
    "reduction_looped": (lambda x: (x.sum(-1), x.amin(-1)), lambda: [_nc(4, 3000)]),
    "mm_bias_gelu": (
        lambda x, w, b: F.gelu(x @ w + b),
        lambda: [_nc(32, 48), _t(48, 64), torch.randn(64, device=DEVICE)],
    ),
    "linear_tanh_gelu_residual": (
        lambda x, w, b: x.sum(-1, keepdim=True) + F.gelu(F.linear(x, w, b), approximate="tanh"),
        lambda: [_nc(16, 24), torch.randn(24, 24, device=DEVICE), _nc(24)],
    ),
    "bmm_softmax": (
        _attention_scores,
        lambda: [_nc(2, 4, 16, 8), torch.randn(2, 16, 4, 8, device=DEVICE).transpose(1, 2)],
    ),
    "bf16_mlp": (
        lambda x, w: F.layer_norm(F.silu(x @ w), (32,)),
        lambda: [
            torch.randn(16, 40, device=DEVICE).bfloat16(),
            torch.randn(32, 40, device=DEVICE).bfloat16().t(),
        ],
    ),
    "aten_fallback_cumsum": (
        lambda x: torch.cumsum(x.exp(), -1) * 2 + 1,
        lambda: [_nc(8, 30)],
    ),
    # GPU graphs add a convolution's bias in the kernel of the op that reads the result
    "conv_bias_relu": (
        lambda x, w, b: F.conv2d(x, w, b, padding=1).relu() * 2,
        lambda: [
            torch.randn(2, 6, 20, 20, device=DEVICE)[:, :, ::2, ::2],
            torch.randn(8, 6, 3, 3, device=DEVICE),
            _nc(8),
        ],
    ),
    "embedding_gather": (
        lambda idx, w: F.embedding(idx, w) * 2 + 1,
        lambda: [torch.randint(0, 50, (4, 9), device=DEVICE), _nc(50, 16)],
    ),
}


def run_case(name):
    fn, make = CASES[name]
    _, info = _check(fn, make)
    return info


def run_transformer_block():
    block = _block()
    x = torch.randn(2, 32, 64, device=DEVICE).transpose(0, 1).contiguous().transpose(0, 1)
    params = dict(block.named_parameters())
    buffers = dict(block.named_buffers())
    names = list(params) + list(buffers)

    def fn(x, *state):
        with torch.nn.utils.stateless._reparametrize_module(block, dict(zip(names, state))):
            return block(x)

    state = list(params.values()) + list(buffers.values())
    c, info = _check(fn, lambda: [x, *[t.detach() for t in state]])
    assert info["externs"] >= 4, info  # qkv, two bmm, proj, fc, out
    return info


def _raises_within(calls):
    """The IndexError message of the first of `calls` that raises one (and which call)."""
    for k, call in enumerate(calls):
        try:
            call()
        except IndexError as e:
            return f"{e} [call {k}]"
    return "did not raise"


def run_out_of_bounds():
    fn = lambda idx, w: F.embedding(idx, w) + 1  # noqa: E731
    idx = torch.tensor([1, 2, 60], device=DEVICE)
    good = torch.tensor([1, 2, 3], device=DEVICE)
    w = torch.randn(50, 4, device=DEVICE)
    c = _compile(fn, [idx, w])
    first = _raises_within([lambda: c(idx, w)])  # the first call reads the flag at once
    assert "[call 0]" in first, first
    torch.testing.assert_close(c(good, w), fn(good, w))

    # later calls: at once on CPU; on a GPU the flag is read without stalling, so the error
    # shows a call or two after the device has run the kernel that set it (the calls wait
    # for the device here: how many calls a fast host makes meanwhile is not the question)
    def settled(call):
        def run():
            call()
            if DEVICE == "cuda":
                torch.cuda.synchronize()

        return run

    later = _raises_within([settled(lambda: c(idx, w))] + [settled(lambda: c(good, w))] * 2)
    assert "out of range" in later, later
    for _ in range(2):  # the flag is cleared once reported
        torch.testing.assert_close(c(good, w), fn(good, w))
    return {"raised": first, "later": later}


def run_forced_fallback():
    """A kernel that cannot be generated: its group's FX nodes become ATen fallbacks."""
    from danlu_inductor.codegen.triton import kernel as tk

    original = tk.TritonKernel.codegen

    def failing(self):
        src = original(self)
        if "dm.erf" in src or "libdevice" in src or "erf" in src:
            raise NotImplementedError("test: no erf in this backend")
        return src

    tk.TritonKernel.codegen = failing
    try:
        fn = lambda x, w: F.gelu(x @ w).softmax(-1) + x.sum()  # noqa: E731
        inputs = [_nc(16, 32), torch.randn(32, 32, device=DEVICE)]
        from helpers import aten_graph

        from danlu_inductor import compile_fx

        c = compile_fx(aten_graph(fn, *inputs), inputs)
    finally:
        tk.TritonKernel.codegen = original
    assert c.report.get("backend") == "triton", c.report
    fallbacks = c.report["triton_fallbacks"]
    assert fallbacks and "no erf" in fallbacks[0]["error"], fallbacks
    got = c(*inputs)
    torch.testing.assert_close(got, _reference(fn, inputs)[0], **_tol(torch.float32))
    return {
        "triton_fallbacks": fallbacks,
        "fallback_ops": c.report["fallback_ops"],
        "kernels": c.report["kernels"],
    }


def run_dump(tmp):
    """DANLU_DEBUG_DIR receives the wrapper and the kernels; the wrapper is a module that
    imports and runs on its own."""
    import importlib.util

    os.environ["DANLU_DEBUG_DIR"] = tmp
    try:
        fn = lambda x: torch.softmax(x * 2, -1)  # noqa: E731
        x = _nc(8, 20)
        c = _compile(fn, [x])
    finally:
        del os.environ["DANLU_DEBUG_DIR"]
    dirs = sorted(x for x in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, x)))
    d = os.path.join(tmp, dirs[-1])
    files = sorted(os.listdir(d))
    spec = importlib.util.spec_from_file_location("dumped_wrapper", os.path.join(d, "wrapper.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    call = mod.make_call(c.launchers, c.consts, DEVICE)
    got = call([x])[0]
    torch.testing.assert_close(got, fn(x))
    return {"files": files}


def run_cudagraphs_option():
    """mode="reduce-overhead": on CPU skipped with a reason; on a GPU captured and replayed
    on fresh inputs (a gather included: its bounds flag is read after the replay), earlier
    results stay valid, a bad index still raises."""

    def fn(idx, w, x):
        return (F.embedding(idx, w) * 2 + x).softmax(-1), x.sum()

    w = _nc(50, 16)

    def make():
        return torch.randint(0, 50, (4, 9), device=DEVICE), _nc(4, 9, 16)

    idx, x = make()
    c = _compile(fn, [idx, w, x], options={"mode": "reduce-overhead"})
    kept = []
    for _ in range(5):
        idx, x = make()
        got = c(idx, w, x)
        ref = fn(idx, w, x)
        kept.append((got, [r.clone() for r in ref]))
        torch.testing.assert_close(got, ref)
    for got, ref in kept:
        torch.testing.assert_close(got, ref)
    info = {"cudagraphs": c.report.get("cudagraphs")}

    # on a GPU the flag is read without stalling: the error may surface a call later
    def good_call():
        i, xx = make()
        return c(i, w, xx)

    info["bad_index"] = _raises_within(
        [lambda: c(torch.full((4, 9), 60, device=DEVICE), w, x)] + [good_call] * 3
    )
    idx, x = make()
    torch.testing.assert_close(c(idx, w, x), fn(idx, w, x))
    if DEVICE == "cuda":
        assert info["cudagraphs"].startswith("captured"), info
        assert "out of range" in info["bad_index"], info
    return info


class _ReplayByRerun:
    """Stands in for a CUDA graph on CPU: replay() reruns the recorded call on the same
    static inputs and writes into the outputs it returned at "capture"."""

    def __init__(self, call, static_inputs):
        self.call, self.static = call, static_inputs
        self.outs = call(list(static_inputs))

    def replay(self):
        for o, n in zip(self.outs, self.call(list(self.static))):
            if isinstance(o, torch.Tensor) and o.data_ptr() != n.data_ptr():
                o.copy_(n)


def _record_by_rerun(call, static, device):
    """A runner's ``_record`` on CPU: (the stand-in graph, its outputs)."""
    g = _ReplayByRerun(call, static)
    return g, g.outs


def run_cudagraph_runner_logic():
    """The CUDA graph runner's bookkeeping without a GPU (capture replaced by re-running):
    warm-up, static inputs read in place, copies of the others, results that stay valid,
    an input that moves (copied from then on), the bounds flag read after replay, inputs
    mutated in place copied back, the reasons for skipping."""
    if DEVICE != "cpu":  # the stand-in replays on CPU; cudagraphs_option runs the real one
        return {"skipped": "CPU stand-in for CUDA graph capture"}
    from danlu_inductor import cudagraphs
    from danlu_inductor.options import validate_options
    from danlu_inductor.pipeline.triton import compile_triton

    def fn(idx, w, x):
        return (F.embedding(idx, w) * 2 + x).softmax(-1), x.sum()

    def make():
        return torch.randint(0, 50, (4, 9)), _nc(4, 9, 16)

    w = _nc(50, 16)
    idx, x = make()
    from helpers import aten_graph

    opts = validate_options({"cudagraphs": True})
    c = compile_triton(aten_graph(fn, idx, w, x), [idx, w, x], torch.device("cpu"), opts)
    assert "_err.item()" not in c.wrapper_source  # no sync inside the captured call
    runner = cudagraphs.CudaGraphRunner(c, ())
    runner._record = _record_by_rerun
    states, kept = [], []
    for k in range(7):
        if k == 4:
            w = _nc(50, 16)  # the in-place input moves
        idx, x = make()
        got = runner(idx, w, x)
        kept.append((got, [r.clone() for r in fn(idx, w, x)]))
        states.append(runner.report["cudagraphs"])
    for got, ref in kept:
        torch.testing.assert_close(got, ref)
    assert states[0] == "warm-up" and states[1].startswith("captured (1x); 1 of 3"), states
    assert states[-1].startswith("captured (2x); 0 of 3"), states
    try:
        runner(torch.full((4, 9), 60), w, x)
        raise AssertionError("bad index did not raise after replay")
    except IndexError as e:
        bad = str(e)
    # an input mutated in place: copied back after each replay
    g = torch.fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    g.call_function(
        torch.ops.aten.add_.Tensor, (a, g.call_function(torch.ops.aten.mul.Tensor, (b, 2)))
    )
    g.output([g.call_function(torch.ops.aten.mul.Tensor, (b, 3))])
    gm = torch.fx.GraphModule({}, g)
    A, B = torch.randn(5), torch.randn(5)
    c2 = compile_triton(gm, [A.clone(), B], torch.device("cpu"), opts)
    assert cudagraphs.unsafe_reason(c2, gm, [A, B])[0].startswith("input 0 is on cpu")
    reason, mutated = cudagraphs.graph_hazards(gm)
    assert reason is None and mutated == (0,), (reason, mutated)
    view = torch.fx.Graph()
    a, b = view.placeholder("a"), view.placeholder("b")
    v = view.call_function(torch.ops.aten.view.default, (a, [5]))
    view.call_function(torch.ops.aten.add_.Tensor, (v, b))
    view.output([b])
    reason, _ = cudagraphs.graph_hazards(torch.fx.GraphModule({}, view))
    assert "mutates a view of input a" in reason, reason
    r2 = cudagraphs.CudaGraphRunner(c2, mutated)
    r2._record = runner._record
    for _ in range(4):
        A, B = torch.randn(5), torch.randn(5)
        expect = A + 2 * B
        out = r2(A, B)
        torch.testing.assert_close(A, expect)
        torch.testing.assert_close(out[0], 3 * B)
    # an input read in place that comes back at the same address with other strides (a
    # square matrix transposed): caught by the layout check, copied from then on
    g3 = torch.fx.Graph()
    a, b = g3.placeholder("a"), g3.placeholder("b")
    g3.output([g3.call_function(torch.ops.aten.add.Tensor, (a, b))])
    gm3 = torch.fx.GraphModule({}, g3)
    M, N = torch.randn(6, 6), torch.randn(6, 6)
    c3 = compile_triton(gm3, [M, N], torch.device("cpu"), opts)
    r3 = cudagraphs.CudaGraphRunner(c3, (), cudagraphs.promised_layouts(gm3, 2))
    r3._record = runner._record
    alive = []  # every b stays alive: a fresh address each call, never read in place
    for m in (M, M, M, M.t(), M.t(), M):
        alive.append(torch.randn(6, 6))
        torch.testing.assert_close(r3(m, alive[-1])[0], m + alive[-1])
    # the same object transposed in place (same address, new strides): also caught
    r4 = cudagraphs.CudaGraphRunner(c3, (), cudagraphs.promised_layouts(gm3, 2))
    r4._record = runner._record
    M = torch.randn(6, 6)
    for k in range(5):
        if k == 3:
            M.t_()
        alive.append(torch.randn(6, 6))
        torch.testing.assert_close(r4(M, alive[-1])[0], M + alive[-1])
    # outputs handed over (aotautograd's inference graphs): a replay returns the graph's own
    # memory while the caller holds no earlier result; a held result sends the call around
    # the graph (fresh memory), and after MAX_HELD_CALLS such calls the runner copies again
    r5 = cudagraphs.CudaGraphRunner(c, (), share_outputs=True)
    r5._record = runner._record
    w = _nc(50, 16)
    ptrs = []
    for _ in range(5):  # each result dropped before the next call
        idx, x = make()
        got = r5(idx, w, x)
        torch.testing.assert_close(got, fn(idx, w, x))
        ptrs.append(got[0].data_ptr())
        del got
    assert len(set(ptrs[1:])) == 1, ptrs  # every replay: the graph's memory, no copy
    held = []
    for _ in range(6):  # every result kept (a list of predictions)
        idx, x = make()
        held.append((r5(idx, w, x), [r.clone() for r in fn(idx, w, x)]))
    for got, ref in held:
        torch.testing.assert_close(got, ref)
    assert held[0][0][0].data_ptr() == ptrs[-1]  # the first kept one was a replay's
    assert len({got[0].data_ptr() for got, _ in held}) == 6
    sharing = r5.report.get("cudagraphs_outputs", "")
    assert sharing.startswith("copied"), r5.report
    # two calls ran around the graph, the third captured it again: replays go on while the
    # caller keeps everything
    replays = r5.replays
    idx, x = make()
    torch.testing.assert_close(r5(idx, w, x), fn(idx, w, x))
    assert r5.replays == replays + 1 and r5.captures == 2, (r5.replays, r5.captures)
    gm3.meta["input_layouts_fixed"] = [True, False]
    promised = sorted(cudagraphs.promised_layouts(gm3, 2))
    gm3.meta["input_layouts_fixed"] = True
    assert promised == [0] and sorted(cudagraphs.promised_layouts(gm3, 2)) == [0, 1]

    # a capture the allocator or the driver refuses: replays stop, and this call and the
    # next run the compiled graph on their own arguments
    def refuse(call, static, device):
        raise RuntimeError("capture refused")

    c6 = compile_triton(aten_graph(fn, idx, w, x), [idx, w, x], torch.device("cpu"), opts)
    r6 = cudagraphs.CudaGraphRunner(c6, ())
    r6._record = refuse
    for _ in range(3):
        idx, x = make()
        torch.testing.assert_close(r6(idx, w, x), fn(idx, w, x))
    refused = r6.report["cudagraphs"]
    assert refused.startswith("stopped: capture failed: RuntimeError"), refused
    return {
        "states": states,
        "bad_index": bad,
        "mutation": r2.report["cudagraphs"],
        "restrided": r3.report["cudagraphs"],
        "transposed_in_place": r4.report["cudagraphs"],
        "outputs_handed_over": sharing,
        "capture_refused": refused,
        "pools": _check_pool_lifetime(cudagraphs),
    }


def _check_pool_lifetime(cudagraphs):
    """A device's memory pool is kept while a graph captured into it lives, and replaced once
    none does (the allocator has released it; its handle must not be captured into again)."""
    import gc

    class Graph:  # stands in for torch.cuda.CUDAGraph: only its lifetime matters here
        pass

    handles = iter(range(100))
    real = torch.cuda.graph_pool_handle
    torch.cuda.graph_pool_handle = lambda: (0, next(handles))
    dev = torch.device("cuda", 99)
    try:
        first, graphs = cudagraphs._pool(dev)
        g = Graph()
        graphs.add(g)
        again = cudagraphs._pool(dev)[0]
        del g
        gc.collect()
        fresh = cudagraphs._pool(dev)[0]
    finally:
        torch.cuda.graph_pool_handle = real
        cudagraphs._POOLS.pop(dev, None)
    assert again == first and fresh != first, (first, again, fresh)
    return [first, again, fresh]


def run_max_autotune():
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    x = torch.randn(512, 700, device=DEVICE)
    c = _compile(fn, [x], options={"mode": "max-autotune-no-cudagraphs"})
    torch.testing.assert_close(c(x), fn(x))
    return {
        name: {
            "candidates": len(fn_.configs or fn_.candidates()),
            "config": str(fn_.config),
            "timings_us": getattr(fn_, "timings", None),
        }
        for name, fn_ in c.launchers.items()
    }


def run_direct_launch():
    """Later launches skip Triton's Python launch path when the arguments specialise as on
    the first launch; an input at an odd offset (other alignment) takes the normal path."""
    fn = lambda x, y: (x * y).sum(-1) + x.amax(-1)  # noqa: E731
    base = torch.randn(64 * 301 + 1, device=DEVICE)

    def view(offset):  # a (64, 300) view; offset 1 breaks 16-byte alignment
        return base[offset : offset + 64 * 301].view(64, 301)[:, :300]

    y = torch.randn(64, 300, device=DEVICE)
    c = _compile(fn, [view(0), y])
    for offset in (0, 0, 1, 0, 1, 1, 0):
        x = view(offset)
        torch.testing.assert_close(c(x, y), fn(x, y))
    direct = {
        name: [type(d).__name__ for d in launcher._direct.values()]
        for name, launcher in c.launchers.items()
    }
    if DEVICE == "cuda":
        from danlu_inductor.codegen.triton.backend import DirectLaunch

        assert all("DirectLaunch" in kinds for kinds in direct.values()), (
            direct,
            DirectLaunch.unavailable,
        )
        # static sizes: the settled launch is one bound closure
        assert all(callable(launcher._go) for launcher in c.launchers.values())
    return {"direct": direct}


def run_padded_matmuls():
    """bf16 matmuls with rows that are not a multiple of 16 bytes are padded (K and N), the
    results equal eager's, and a padded product's slice that is a graph output (a view of it
    too) is returned with its rows padded to 16 bytes, not copied."""

    def fn(x, w, bias, a, b):
        logits = torch.addmm(bias, x, w.t())  # N = 1001: padded to 1008
        scores = torch.bmm(a, b)  # K = 250: padded
        return logits, (logits.float().softmax(-1) * 2).sum(-1), scores, logits.view(8, 64, 1001)

    gen = torch.Generator(device=DEVICE).manual_seed(torch.seed() % 2**31)

    def r(*shape):
        return torch.randn(*shape, device=DEVICE, generator=gen).to(torch.bfloat16)

    inputs = [r(512, 250), r(1001, 250), r(1001), r(4, 256, 250), r(4, 250, 512)]
    c = _compile(fn, inputs)
    got, want = c(*inputs), fn(*inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=2e-2, atol=2e-2)
    assert got[0].stride() == (1008, 1), got[0].stride()
    assert got[3].stride() == (64 * 1008, 1008, 1), got[3].stride()
    assert got[2].stride() == want[2].stride(), (got[2].stride(), want[2].stride())
    assert c.report["padded_matmuls"] == 2, c.report
    return {"padded": c.report["padded_matmuls"]}


def run_repeated_layers():
    """Three identical layers: their kernels differ only in name and buffers, so the module
    holds each once (aliases for the rest), and every alias computes its own layer."""

    def fn(x, *ws):
        for w1, w2 in zip(ws[::2], ws[1::2]):
            x = torch.nn.functional.layer_norm(x + torch.relu(x @ w1) @ w2, (x.shape[-1],))
        return x

    ws = [_nc(32, 32) * 0.2 for _ in range(6)]
    x = _nc(16, 32)
    c = _compile(fn, [x, *ws])
    torch.testing.assert_close(c(x, *ws), fn(x, *ws), rtol=1e-4, atol=1e-4)
    unique = c.kernel_source.count("@triton.jit")
    assert unique < c.report["kernels"], (unique, c.report["kernels"])
    return {"kernels": c.report["kernels"], "unique": unique}


def run_artifact_roundtrip():
    """A compiled Triton graph described as plain data (through JSON) and loaded back runs
    like the original: a matmul with a fused epilogue and a gather (its bounds flag)."""
    import json

    from danlu_inductor import artifacts

    artifacts._TRITON_ARTIFACTS = True  # this case is what checks the Triton path
    facts = {}
    for name, (fn, make) in {
        "mm_bias_gelu": CASES["mm_bias_gelu"],
        "embedding_gather": CASES["embedding_gather"],
    }.items():
        inputs = make()
        c = _compile(fn, inputs)
        meta, tensors = artifacts.graph_artifact(c)
        loaded = artifacts.load_graph(json.loads(json.dumps(meta)), tensors)
        assert loaded.report["cached"] and loaded.num_kernels == c.num_kernels
        for _ in range(2):
            inputs = make()
            got, ref = _flat(loaded(*inputs)), _reference(fn, inputs)
            for g, r in zip(got, ref):
                assert g.shape == r.shape and g.dtype == r.dtype and g.device == r.device
                torch.testing.assert_close(g, r, equal_nan=True, **_tol(r.dtype))
        facts[name] = loaded.num_kernels
    facts["cudagraph_runner"] = _cudagraph_runner_roundtrip(artifacts)
    return facts


def _cudagraph_runner_roundtrip(artifacts):
    """A graph wrapped for CUDA graph replays (reduce-overhead) is kept with its replay
    settings and comes back wrapped the same way: warm-up, capture, replays give eager's
    values, and a bad index raises after a replay (the loaded graph's bounds flag is read)."""
    import json

    from helpers import aten_graph

    from danlu_inductor import cudagraphs
    from danlu_inductor.options import validate_options
    from danlu_inductor.pipeline.triton import compile_triton

    fn, make = CASES["embedding_gather"]
    idx, w = make()
    opts = validate_options({"cudagraphs": True})
    c = compile_triton(aten_graph(fn, idx, w), [idx, w], torch.device(DEVICE), opts)
    runner = cudagraphs.CudaGraphRunner(c, (), frozenset({1}), share_outputs=False)
    meta, tensors = artifacts.graph_artifact(runner)
    assert meta["cudagraphs"] == {"mutated": [], "fixed_layouts": [1], "share_outputs": False}
    loaded = artifacts.load_graph(json.loads(json.dumps(meta)), tensors)
    assert isinstance(loaded, cudagraphs.CudaGraphRunner), type(loaded)
    assert loaded.settings() == meta["cudagraphs"] and loaded.report["cached"]
    assert loaded.compiled.err_flag is not None and loaded.flag_watch is not None
    if DEVICE == "cpu":  # capture replaced by re-running (see run_cudagraph_runner_logic)
        loaded._record = _record_by_rerun
    states = []
    for _ in range(4):
        idx, _ = make()
        got = loaded(idx, w)
        torch.testing.assert_close(_flat(got)[0], fn(idx, w))
        states.append(loaded.report["cudagraphs"])
    assert states[0] == "warm-up" and states[-1].startswith("captured (1x)"), states
    try:
        for _ in range(3):  # the flag is read after a replay, at latest a call or two later
            loaded(torch.full_like(idx, 60), w)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
        raise AssertionError("a bad index did not raise after a replay")
    except IndexError as e:
        return {"states": states, "bad_index": str(e)[:80]}


def main(mode, out_path):
    global DEVICE
    DEVICE = "cuda" if mode == "cuda" else "cpu"
    torch.manual_seed(0)
    if mode == "cpu":
        assert os.environ.get("TRITON_INTERPRET") == "1"
        assert os.environ.get("DANLU_INDUCTOR_TRITON_ON_CPU") == "1"
    special = {
        "transformer_block": run_transformer_block,
        "out_of_bounds": run_out_of_bounds,
        "forced_fallback": run_forced_fallback,
        "dump": lambda: run_dump(tempfile.mkdtemp(prefix="danlu_dump_")),
        "cudagraphs_option": run_cudagraphs_option,
        "max_autotune": run_max_autotune,
        "cudagraph_runner_logic": run_cudagraph_runner_logic,
        "direct_launch": run_direct_launch,
        "padded_matmuls": run_padded_matmuls,
        "repeated_layers": run_repeated_layers,
        "artifact_roundtrip": run_artifact_roundtrip,
    }

    def run_one(name):
        return special[name]() if name in special else run_case(name)

    record_cases([*CASES, *special], run_one, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
