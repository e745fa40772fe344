"""Dynamic shapes: one trace serves many input sizes while its shape guards hold.

Every check runs the compiled (aot_eager-style: graphs run op by op) module and eager PyTorch on
the same inputs in float64, forward and backward, and compares outputs, input gradients and
parameter gradients.
"""

from __future__ import annotations

import copy

import pytest
import torch
from dynamic_models import ConvNet, TransformerBlock
from helpers import matmul_step_beside_eager

import danlu_aotautograd as da

f64 = torch.float64


def _compare_module_step(compiled, module, reference, x):
    """One forward+backward through ``compiled`` (wrapping ``module``) and ``reference`` (an
    eager copy) on the same input; outputs and every gradient must match."""
    x_c = x.detach().clone().requires_grad_()
    x_r = x.detach().clone().requires_grad_()
    if x.stride() != x_c.stride():  # keep the caller's (non-contiguous) layout
        x_c = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype).copy_(x).requires_grad_()
        x_r = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype).copy_(x).requires_grad_()
    out_c = compiled(x_c)
    out_r = reference(x_r)
    torch.testing.assert_close(out_c, out_r)
    weight = torch.randn_like(out_r)
    (out_c * weight).sum().backward()
    (out_r * weight).sum().backward()
    torch.testing.assert_close(x_c.grad, x_r.grad)
    for (name, p), (_, p_r) in zip(module.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, p_r.grad, msg=lambda m, name=name: f"{name}: {m}")
    module.zero_grad()
    reference.zero_grad()


@pytest.mark.parametrize("partition", ["min_cut", "default+canonical"])
def test_transformer_block_varying_batch_and_sequence(partition):
    torch.manual_seed(0)
    module = TransformerBlock().to(f64)
    reference = copy.deepcopy(module)
    # the second run also decomposes to the canonical ATen set (what danlu-inductor asks for)
    partition_fn = da.min_cut_partition if partition == "min_cut" else da.default_partition
    decompositions = None if partition == "min_cut" else "canonical"
    compiled = da.aot_module(
        module,
        da.run_graph,
        partition_fn=partition_fn,
        decompositions=decompositions,
        dynamic=True,
    )
    sizes = [(2, 5), (3, 7), (4, 16), (2, 9), (5, 3), (3, 4)]
    if partition != "min_cut":
        sizes = sizes[:3]  # (the min-cut run covers more sizes; this one the other partition)
    for b, t in sizes:
        x = torch.randn(b, t, 32, dtype=f64)
        if t % 2:  # every other input is a non-contiguous (transposed) view
            x = torch.randn(t, b, 32, dtype=f64).transpose(0, 1)
        _compare_module_step(compiled, module, reference, x)
    aot = compiled.aot
    # one layout change (contiguous <-> transposed) is one more trace, nothing else
    assert aot.stats["traces"] == 2, aot.retrace_reasons  # contiguous, then transposed
    assert aot.stats["guard_hits"] == len(sizes) - 2
    assert all("stride" in r for r in aot.retrace_reasons)
    fw = aot.compiled[0].partition.forward
    assert fw.meta["shape_env"] is aot.compiled[0].program.shape_env
    x_val = [n for n in fw.graph.nodes if n.op == "placeholder"][-1].meta["val"]
    assert all(isinstance(s, torch.SymInt) for s in x_val.shape[:2])


def test_convnet_varying_batch():
    torch.manual_seed(0)
    module = ConvNet().to(f64).train()
    reference = copy.deepcopy(module)
    compiled = da.aot_module(module, da.run_graph, dynamic=lambda i, t: (0,))
    for b in (2, 3, 5, 8, 4):
        x = torch.randn(b, 3, 12, 12, dtype=f64)
        _compare_module_step(compiled, module, reference, x)
        # BatchNorm's running statistics are written back at every size
        torch.testing.assert_close(module.bn1.running_mean, reference.bn1.running_mean)
        torch.testing.assert_close(module.bn1.running_var, reference.bn1.running_var)
    assert compiled.aot.stats["traces"] == 1, compiled.aot.retrace_reasons
    guards = compiled.aot.compiled[0].program.shape_env.format_guards()
    assert "2 <= primals_11.size(0)" in guards and "primals_11.size(2) == 12" in guards


def test_convnet_all_dims_symbolic_channels_last_and_eval():
    torch.manual_seed(0)
    module = ConvNet().to(f64)
    reference = copy.deepcopy(module)
    compiled = da.aot_module(module, da.run_graph, dynamic=True)
    for b, hw in ((2, 16), (3, 12), (5, 9)):
        x = torch.randn(b, 3, hw, hw, dtype=f64).to(memory_format=torch.channels_last)
        _compare_module_step(compiled, module, reference, x)
    assert compiled.aot.stats["traces"] == 1, compiled.aot.retrace_reasons
    module.eval()
    reference.eval()
    with torch.no_grad():
        for b, hw in ((3, 10), (6, 14)):
            x = torch.randn(b, 3, hw, hw, dtype=f64)
            torch.testing.assert_close(compiled(x), reference(x))
    assert [c.program.joint for c in compiled.aot.compiled] == [True, False]


def test_float32_against_float64_reference():
    torch.manual_seed(0)
    module = TransformerBlock()
    reference = copy.deepcopy(module).to(f64)
    compiled = da.aot_module(module, da.run_graph, dynamic=True)
    for b, t in ((2, 4), (3, 10), (5, 6)):
        x = torch.randn(b, t, 32)
        x_r = x.to(f64).requires_grad_()
        x_c = x.clone().requires_grad_()
        out = compiled(x_c)
        out.sum().backward()
        reference(x_r).sum().backward()
        torch.testing.assert_close(x_c.grad, x_r.grad.float(), atol=1e-4, rtol=1e-4)
        for p, p_r in zip(module.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, p_r.grad.float(), atol=2e-4, rtol=1e-4)
        module.zero_grad()
        reference.zero_grad()
    assert compiled.aot.stats["traces"] == 1


def _graph_inputs(compiler_log):
    def compiler(gm, example_inputs):
        compiler_log.append((gm, list(example_inputs)))
        return da.run_graph(gm, example_inputs)

    return compiler


@pytest.mark.parametrize("partition", [da.min_cut_partition, da.default_partition])
def test_sizes_the_backward_needs_are_saved_as_symints(partition):
    # backward of sum() expands the tangent to x's size; x itself is not needed, so the forward
    # saves the sizes (SymInts), not x
    def f(x):
        return (x * 2).sum()

    log = []
    compiled = da.aot_function(f, _graph_inputs(log), partition_fn=partition, dynamic=True)
    for shape in ((3, 4), (5, 2), (7, 9)):
        x = torch.randn(shape, requires_grad=True)
        y = compiled(x)
        y.backward()
        torch.testing.assert_close(y, f(x.detach()))
        torch.testing.assert_close(x.grad, torch.full(shape, 2.0))
    assert compiled.stats["traces"] == 1
    (fw_gm, fw_inputs), (bw_gm, bw_inputs) = log
    saved = compiled.compiled[0].partition.saved
    assert saved and all(
        isinstance(n.meta["val"], torch.SymInt)
        for n in bw_gm.graph.nodes
        if n.op == "placeholder" and n.name in saved
    )
    assert any(isinstance(v, torch.SymInt) for v in bw_inputs)
    assert not any(isinstance(v, torch.Tensor) and v.dim() == 2 for v in bw_inputs[:-1])


def test_sizes_recomputed_from_saved_tensors():
    # backward of x * y needs x and y (saved anyway): their sizes are read from them in the
    # backward rather than saved separately
    def f(x, y):
        return (x.view(x.shape[0] * x.shape[1]) * y).sin()

    compiled = da.aot_function(f, da.run_graph, dynamic=True)
    for n, m in ((3, 4), (2, 5), (4, 4)):
        x = torch.randn(n, m, requires_grad=True)
        y = torch.randn(n * m, requires_grad=True)
        out = compiled(x, y)
        out.sum().backward()
        x_r, y_r = x.detach().requires_grad_(), y.detach().requires_grad_()
        f(x_r, y_r).sum().backward()
        torch.testing.assert_close(x.grad, x_r.grad)
        torch.testing.assert_close(y.grad, y_r.grad)
    partition = compiled.compiled[0].partition
    bw_nodes = {n.name: n for n in partition.backward.graph.nodes}
    assert all(not isinstance(bw_nodes[s].meta["val"], torch.SymInt) for s in partition.saved)
    assert any(n.target is torch.ops.aten.sym_size.int for n in bw_nodes.values())


@pytest.mark.parametrize("partition", [da.min_cut_partition, da.default_partition])
def test_saved_sizes_read_from_a_saved_tensor_instead(partition):
    # sum's backward needs x's sizes; x is not saved, but softmax's output (same sizes) is:
    # the backward reads them from it and the forward hands over no SymInt
    def f(x):
        return x.softmax(-1).sum()

    compiled = da.aot_function(f, da.run_graph, partition_fn=partition, dynamic=True)
    for shape in ((3, 4), (5, 7), (8, 2)):
        x = torch.randn(shape, requires_grad=True)
        x_r = x.detach().requires_grad_()
        compiled(x).backward()
        f(x_r).backward()
        torch.testing.assert_close(x.grad, x_r.grad)
    partition_result = compiled.compiled[0].partition
    assert partition_result.saved == ["_softmax_default"]
    fw_out = next(n for n in partition_result.forward.graph.nodes if n.op == "output")
    assert not any(isinstance(o.meta["val"], torch.SymInt) for o in fw_out.args[0])
    bw_sizes = [
        n for n in partition_result.backward.graph.nodes if n.target is torch.ops.aten.sym_size.int
    ]
    assert bw_sizes and all(n.args[0].name == "_softmax_default" for n in bw_sizes)


def test_guard_on_a_size_branch_retraces_only_when_crossing():
    def f(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1

    compiled = da.aot_function(f, da.run_graph, dynamic=True)
    for n in (20, 30, 17, 40):
        x = torch.randn(n, 3, requires_grad=True)
        torch.testing.assert_close(compiled(x), f(x))
    assert compiled.stats["traces"] == 1
    for n in (12, 5):
        x = torch.randn(n, 3, requires_grad=True)
        torch.testing.assert_close(compiled(x), f(x))
    assert compiled.stats["traces"] == 2 and compiled.stats["retraces"] == 1
    assert "primals_0.size(0) > 16" in compiled.retrace_reasons[0]
    # both compilations stay; each size finds its own
    ones = torch.ones(25, 3, requires_grad=True)
    torch.testing.assert_close(compiled(ones), torch.full((25, 3), 2.0))
    ones = torch.ones(3, 3, requires_grad=True)
    torch.testing.assert_close(compiled(ones), torch.zeros(3, 3))
    assert compiled.stats["traces"] == 2


def test_size_one_is_specialised_and_retraced():
    def f(x, w):
        return (x @ w).tanh()

    compiled = da.aot_function(f, da.run_graph, dynamic=True)
    w = torch.randn(6, 4, requires_grad=True)
    for n in (3, 1, 5, 1):
        x = torch.randn(n, 6, requires_grad=True)
        out = compiled(x, w)
        torch.testing.assert_close(out, f(x, w))
    assert compiled.stats["traces"] == 2
    assert "primals_0.size(0)" in compiled.retrace_reasons[0]


def test_retrace_is_logged(caplog):
    compiled = da.aot_function(
        lambda x: x.sum(0) if x.shape[0] > 4 else x.mean(0), da.run_graph, dynamic=True
    )
    compiled(torch.randn(8, 2))
    with caplog.at_level("INFO", logger="danlu_aotautograd"):
        compiled(torch.randn(2, 2))
    assert any("tracing again" in r.getMessage() for r in caplog.records)


def test_view_outputs_replayed_at_the_call_size():
    # an output that is a view of an input is rebuilt outside the graph: its symbolic view
    # arguments are evaluated for the current sizes
    def f(x):
        return x.view(x.shape[0] * x.shape[1]), x * 3

    compiled = da.aot_function(f, da.run_graph, dynamic=True)
    for shape in ((2, 3), (4, 5), (3, 3)):
        x = torch.randn(shape)
        v, y = compiled(x)
        assert v.shape == (shape[0] * shape[1],) and v.data_ptr() == x.data_ptr()
        torch.testing.assert_close(y, x * 3)
    assert compiled.stats["traces"] == 1


def test_data_dependent_sizes_are_refused_with_the_op_named():
    def masked(x):
        return x[x > 0].sum()

    def nonzero(x):
        return x.nonzero().float().sum()

    for fn, op in ((masked, "index"), (nonzero, "nonzero")):
        compiled = da.aot_function(fn, da.run_graph, dynamic=True)
        with pytest.raises(da.AotNotSupported, match=op):
            compiled(torch.randn(5, 3, requires_grad=True))


def test_returning_a_size_is_refused():
    compiled = da.aot_function(lambda x: (x * 2, x.shape[0]), da.run_graph, dynamic=True)
    with pytest.raises(da.AotNotSupported, match="symbolic size"):
        compiled(torch.randn(4, 3))


def test_printing_shows_symbols_and_guards():
    def f(x):
        if x.shape[1] > 2:
            return x.softmax(-1)
        return x

    compiled = da.aot_function(f, da.run_graph, dynamic=True)
    compiled(torch.randn(3, 5, requires_grad=True))
    text = da.format_aot(compiled)
    assert "f32[s0, s1]" in text
    assert "shape guards:" in text and "primals_0.size(1) > 2" in text


def test_backend_under_torch_compile_dynamic_traces_once():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    seen = []

    def compiler(gm, example_inputs):
        seen.append(example_inputs)
        return da.run_graph(gm, example_inputs)

    backend = da.aot_backend(compiler)
    made = []

    def capture_backend(gm, example_inputs):
        made.append(backend(gm, example_inputs))
        return made[-1]

    compiled = torch.compile(model, backend=capture_backend, dynamic=True)
    for n in (3, 5, 7, 2, 9):
        x = torch.randn(n, 8, requires_grad=True)
        x_r = x.detach().clone().requires_grad_()
        out = compiled(x)
        torch.testing.assert_close(out, model(x_r))
        out.sum().backward()
        model(x_r).sum().backward()
        torch.testing.assert_close(x.grad, x_r.grad)
    aot = made[0].aot_module.aot
    assert len(made) == 1 and aot.stats["traces"] == 1, aot.retrace_reasons
    fw_inputs = seen[0]
    assert any(isinstance(t.shape[0], torch.SymInt) for t in fw_inputs if t.dim())


def test_aot_graph_of_a_symbolic_aten_graph():
    # a graph whose placeholders carry symbolic fake tensors (danlu_primtorch's dynamic trace):
    # it is traced with those dims symbolic, once
    from danlu_primtorch import trace

    def f(x, w):
        return (x.reshape(x.shape[0] * x.shape[1], -1) @ w).relu()

    w = torch.randn(6, 4)
    gm = trace(f, torch.randn(3, 5, 6), w, dynamic=[True, False])
    examples = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    compiled = da.aot_graph(gm, examples, da.run_graph)
    for shape in ((3, 5, 6), (2, 7, 6), (4, 4, 6), (6, 2, 6), (5, 3, 6)):
        matmul_step_beside_eager(compiled, f, torch.randn(shape), w)
    assert compiled.aot_module.aot.stats["traces"] == 1


def test_symbolic_slice_of_a_static_buffer_stays_symbolic():
    # position_ids[:, :seq_len] on a static buffer: ATen's kernel would specialise seq_len
    buf = torch.arange(32.0).reshape(1, 32)

    def f(x, pos):
        return x * pos[:, : x.shape[1]]

    compiled = da.aot_function(f, da.run_graph, dynamic=lambda i, t: (0, 1) if i == 0 else None)
    for shape in ((2, 5), (3, 9), (4, 17), (2, 32)):
        x = torch.randn(shape, requires_grad=True)
        torch.testing.assert_close(compiled(x, buf), f(x, buf))
    assert compiled.stats["traces"] == 1, compiled.retrace_reasons
    guards = compiled.compiled[0].program.shape_env.format_guards()
    assert "primals_0.size(1) <= 32" in guards
    with pytest.raises(RuntimeError):  # past the buffer: eager fails too; no wrong result
        compiled(torch.randn(2, 40), buf)


def test_factory_of_a_symbolic_size_first_in_the_program():
    # torch.arange(seq_len) before any other op, then an embedding of a static weight: the
    # factory's fake must live with the other fakes (it took the mode's default cpu device)
    emb = torch.nn.Embedding(40, 6)

    def f(x, w):
        pos = torch.arange(x.shape[1], device=x.device)
        return x + torch.nn.functional.embedding(pos, w)[None]

    compiled = da.aot_function(f, da.run_graph, dynamic=lambda i, t: (0, 1) if i == 0 else None)
    for shape in ((2, 5, 6), (3, 9, 6), (4, 17, 6)):
        x = torch.randn(shape, requires_grad=True)
        w = emb.weight
        out, ref = compiled(x, w), f(x, w)
        torch.testing.assert_close(out, ref)
        (gx, gw), (rx, rw) = (torch.autograd.grad(o.square().sum(), (x, w)) for o in (out, ref))
        torch.testing.assert_close(gx, rx)
        torch.testing.assert_close(gw, rw)
    assert compiled.stats["traces"] == 1, compiled.retrace_reasons


def test_gpt2_varying_batch_and_sequence():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_size=100,
        n_positions=32,
        eos_token_id=0,
        bos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).eval()  # dropout off: masks differ per size
    reference = copy.deepcopy(model)
    compiled = da.aot_module(model, da.run_graph, dynamic=True)
    for b, t in ((2, 12), (3, 7), (2, 20)):
        ids = torch.randint(0, 100, (b, t))
        out = compiled(input_ids=ids, labels=ids)
        ref = reference(input_ids=ids, labels=ids)
        torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-4)
        out.loss.backward()
        ref.loss.backward()
        for p, p_r in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, p_r.grad, atol=1e-5, rtol=1e-4)
        model.zero_grad()
        reference.zero_grad()
    assert compiled.aot.stats["traces"] == 1, compiled.aot.retrace_reasons


def test_static_fake_examples_keep_the_static_path():
    # a graph whose placeholders hold static danlu_primtorch fakes compiles at once, statically
    from danlu_primtorch import trace

    def f(x, w):
        return (x @ w).relu().sum(0) + torch.ones(3)

    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    gm = trace(f, x, w)
    examples = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    compiled = da.aot_graph(gm, examples, da.run_graph)
    aot = compiled.aot_module.aot
    assert aot.stats["traces"] == 1 and aot.compiled[0].program.shape_env is None
    torch.testing.assert_close(compiled(x, w), f(x, w))
    assert aot.stats["traces"] == 1


def test_backend_falls_back_to_static_shapes_then_eager():
    # a symbolic trace that fails (data-dependent size) is not retried for every new size: the
    # backend compiles per static shape, which fails too here, so the graph runs eagerly
    def f(x):
        return x[x > 0].sum() * 2

    gm = torch.fx.symbolic_trace(f)
    compiled = da.aot_graph(
        gm, [torch.randn(4, 3)], da.run_graph, on_unsupported="eager", dynamic=True
    )
    for n in (4, 6, 8):
        x = torch.randn(n, 3)
        with pytest.warns(UserWarning):
            torch.testing.assert_close(compiled(x), f(x))
    aot = compiled.aot_module.aot
    assert len(aot.dynamic_refused) == 1
    assert aot.stats["traces"] == 1 + 3  # one symbolic attempt, then one static per shape


def test_decomposition_that_needs_a_number_falls_back_to_static_shapes():
    # a decomposition written for concrete sizes raises TypeError on a symbol: the backend
    # compiles per static shape (with a warning), never surfacing the error to the caller
    aten = torch.ops.aten

    def relu_needs_ints(x):
        if not all(isinstance(s, int) for s in x.shape):
            raise TypeError("sizes must be ints here")
        return aten.clamp_min.default(x, 0)

    def f(x):
        return torch.relu(x) * 3

    gm = torch.fx.symbolic_trace(f)
    compiled = da.aot_graph(
        gm,
        [torch.randn(4, 3)],
        da.run_graph,
        decompositions={aten.relu.default: relu_needs_ints},
        on_unsupported="eager",
        dynamic=True,
    )
    with pytest.warns(UserWarning, match="TypeError: sizes must be ints here"):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x), f(x))
    for n in (5, 7):
        x = torch.randn(n, 3)
        torch.testing.assert_close(compiled(x), f(x))
    aot = compiled.aot_module.aot
    assert len(aot.dynamic_refused) == 1
    assert all(c.program.shape_env is None for c in aot.compiled)


def test_inputs_with_a_storage_offset_are_traced_static():
    # symbolic fakes start at offset 0; the canonical decomposition of diagonal addresses the
    # storage (as_strided), so a sliced input would read from the storage's start
    def f(x):
        return x.diagonal() * 2, x + 1

    compiled = da.aot_function(f, da.run_graph, dynamic=True, decompositions="canonical")
    base = torch.randn(200)
    for offset, n in ((3, 4), (0, 5), (7, 6), (3, 4), (0, 7)):
        x = base[offset : offset + n * (n + 1)].view(n, n + 1)
        for got, want in zip(compiled(x), f(x)):
            torch.testing.assert_close(got, want)
    # offset 3 and 7: static traces (the second offset-3 call hits); offset 0: one symbolic trace
    assert compiled.stats["traces"] == 3


class _PatchMerge(torch.nn.Module):
    """A shifted-window model's patch merging: linear on a 4-d input, no bias (the CUDA trace
    of this call read numel() of a symbolic tensor inside ATen's composite), then a batched
    product of two symbolic operands."""

    def __init__(self):
        super().__init__()
        self.reduction = torch.nn.Linear(16, 8, bias=False)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.reduction(x)  # [b, h, w, 8]
        scores = torch.matmul(y, y.transpose(-1, -2))  # [b, h, w, w]
        return self.proj(scores @ y) + y


def test_matmul_and_linear_composites_traced_with_symbolic_sizes(monkeypatch):
    from danlu_primtorch.symbolic import composites

    calls = []
    for name in ("matmul", "linear"):
        real = getattr(composites, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(composites, name, spy)
    torch.manual_seed(0)
    module = _PatchMerge().to(f64)
    reference = copy.deepcopy(module)
    compiled = da.aot_module(module, da.run_graph, dynamic=True)
    for b, h in ((2, 4), (3, 6), (2, 5)):
        x = torch.randn(b, h, h + 1, 16, dtype=f64)
        _compare_module_step(compiled, module, reference, x)
    assert compiled.aot.stats["traces"] == 1, compiled.aot.retrace_reasons
    assert calls.count("linear") >= 2 and calls.count("matmul") >= 2, calls
