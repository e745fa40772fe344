"""aot_graph / aot_backend on FX graphs: torch-level graphs (as capture makes them), ATen-level
graphs (make_fx, used here only as a stand-in producer), fallbacks, dynamic shapes."""

import pytest
import torch
import torch.fx as fx
import torch.nn as nn

import danlu_aotautograd as da


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)
        self.bn = nn.BatchNorm1d(5)

    def forward(self, x, y):
        return (torch.tanh(self.bn(self.lin(x))) * y,)


def test_aot_graph_on_a_torch_level_graph_lifts_parameters():
    torch.manual_seed(0)
    gm = fx.symbolic_trace(Net().train())
    x, y = torch.randn(4, 6), torch.randn(4, 5, requires_grad=True)
    y2 = y.detach().clone().requires_grad_()
    twin = fx.symbolic_trace(Net().train())
    twin.load_state_dict(gm.state_dict())
    compiled = da.aot_graph(gm, [x, y], da.run_graph)
    assert len(compiled.aot_module.aot.compiled) == 1  # compiled ahead of the first call
    (out,) = compiled(x, y)
    (expected,) = twin(x, y2)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(y.grad, y2.grad)
    for (name, p), q in zip(gm.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    torch.testing.assert_close(gm.bn.running_mean, twin.bn.running_mean)


def test_aot_graph_on_an_aten_graph_from_make_fx():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        return torch.nn.functional.silu(x @ w).sum(0)

    x, w = torch.randn(5, 3), torch.randn(3, 4, requires_grad=True)
    gm = make_fx(f)(x, w)
    compiled = da.aot_graph(gm, [x, w], da.run_graph)
    out = compiled(x, w)
    torch.testing.assert_close(out, f(x, w))
    (g,) = torch.autograd.grad(out.sum(), w)
    (expected,) = torch.autograd.grad(f(x, w).sum(), w)
    torch.testing.assert_close(g, expected)


def test_backend_falls_back_to_eager_with_a_reason():
    gm = fx.symbolic_trace(lambda x: x.nonzero())
    backend = da.aot_backend(da.run_graph)
    x = torch.tensor([0.0, 1.0, 2.0])
    with pytest.warns(UserWarning, match="running eagerly"):
        fn = backend(gm, [x])
        out = fn(x)
    torch.testing.assert_close(out, x.nonzero())


def test_backend_handles_grad_mode_changes():
    gm = fx.symbolic_trace(Net().eval())
    x, y = torch.randn(4, 6), torch.randn(4, 5)
    fn = da.aot_eager(gm, [x, y])
    with torch.no_grad():
        (a,) = fn(x, y)
    (b,) = fn(x, y)
    assert not a.requires_grad and b.requires_grad
    torch.testing.assert_close(a, b.detach())
    kinds = [c.program.joint for c in fn.aot_module.aot.compiled]
    assert kinds == [True, False]  # compiled at capture time (grad on), then for no_grad


def test_torch_compile_dynamic_shapes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
    compiled = torch.compile(model, backend=da.aot_eager, dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x), model(x))
        compiled(x).sum().backward()


def test_input_aliasing_with_writes_is_refused():
    def f(a, b):
        a.add_(1)
        return b * 2

    base = torch.zeros(4)
    compiled = da.aot_function(f, da.run_graph)
    with pytest.raises(da.AotNotSupported, match="share memory"):
        compiled(base, base)


def test_input_aliasing_with_writes_runs_eagerly_under_a_backend():
    # what a capture backend sees for f(x, x[1:]): a graph that writes its second input
    def f(a, b):
        b.mul_(2)
        return a.sum(), b

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(4, 5)
    compiled = da.aot_backend(da.run_graph, guarded_inputs=True)(gm, [x, x[1:]])
    ref = x.clone()
    expected = f(ref, ref[1:])
    with pytest.warns(UserWarning, match="share memory"):
        got = compiled(x, x[1:])
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(x, ref)  # the write went through the alias, as in eager


def test_second_backward_with_retain_graph():
    w = torch.randn(5, 3, requires_grad=True)
    w_ref = w.detach().clone().requires_grad_()

    def f(x, w):
        return torch.tanh(x @ w).square().sum()

    compiled = da.aot_function(f, da.run_graph)
    x = torch.randn(4, 5)
    loss, ref = compiled(x, w), f(x, w_ref)
    loss.backward(retain_graph=True)
    loss.backward()  # the saved values are still there
    ref.backward(retain_graph=True)
    ref.backward()
    torch.testing.assert_close(w.grad, w_ref.grad)


def test_detached_outputs_do_not_require_grad_under_a_decomposition_table():
    # canonical decompositions record detach as alias: the replayed view must be detached
    def f(x):
        y = x * 2
        return y, y.detach(), x.detach(), x[1:].detach()

    compiled = da.aot_function(f, da.run_graph, decompositions="canonical")
    x = torch.randn(4, requires_grad=True)
    got, want = compiled(x), f(x)
    assert [o.requires_grad for o in got] == [o.requires_grad for o in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_program_returning_only_a_detached_input():
    compiled = da.aot_function(lambda x: x.detach(), da.run_graph)
    x = torch.randn(3, requires_grad=True) * 2
    out = compiled(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, x.detach())


def test_convolution_on_channels_last_input_is_traced_channels_last():
    """The meta kernel of convolution says contiguous; eager's kernels return channels-last
    for a channels-last input, and the traced value says so (compilers lay it out from it)."""
    seen = []

    def compiler(gm, inputs):
        seen.append(gm)
        return gm

    w, b = torch.randn(6, 4, 3, 3, requires_grad=True), torch.randn(6, requires_grad=True)

    def f(x, w, b):
        return torch.relu(torch.nn.functional.conv2d(x, w, b, padding=1))

    x = torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last).requires_grad_()
    out = da.aot_function(f, compiler)(x, w, b)
    torch.testing.assert_close(out, f(x, w, b))
    (conv_node,) = [
        n for n in seen[0].graph.nodes if n.target is torch.ops.aten.convolution.default
    ]
    val = conv_node.meta["val"]
    assert val.is_contiguous(memory_format=torch.channels_last) and not val.is_contiguous()


def test_min_cut_reports_the_memory_it_saves_against_the_default_partition():
    # sin(cos(x)) * 3: the default partition saves cos(x) (backward reads it for sin's
    # derivative); min-cut recomputes cos(x) from x, which is alive anyway
    def fn(x):
        return (torch.sin(torch.cos(x)) * 3).sum()

    x = torch.randn(64, requires_grad=True)
    results = {}
    for partition in (da.default_partition, da.min_cut_partition):
        compiled = da.aot_function(fn, da.run_graph, partition_fn=partition)
        compiled(x).backward()
        (program,) = compiled.compiled
        results[partition.__name__] = program.partition
    default, min_cut = results["default_partition"], results["min_cut_partition"]
    default_bytes = default.saved_bytes - default.saved_input_bytes
    assert default_bytes >= 64 * 4
    assert min_cut.details["default_saved_bytes"] == default_bytes
    kept = min_cut.saved_bytes - min_cut.saved_input_bytes
    assert min_cut.memory_saved_bytes == default_bytes - kept > 0
    assert f"{min_cut.memory_saved_bytes} bytes fewer kept for backward" in min_cut.report()
    assert default.memory_saved_bytes is None


def test_partition_report_survives_a_backend_rewriting_the_forward():
    # backends run their passes on the forward graph they are handed; the report lists the
    # saved values as they were when the partition was made
    def fn(x):
        return (torch.sin(torch.cos(x)) * 3).sum()

    def renaming_backend(gm, example_inputs):
        for n in gm.graph.nodes:
            if n.op == "call_function":
                n.name = f"{n.name}_rewritten"
        gm.recompile()
        return da.run_graph(gm, example_inputs)

    compiled = da.aot_function(fn, renaming_backend, partition_fn=da.default_partition)
    x = torch.randn(16, requires_grad=True)
    compiled(x).backward()
    (program,) = compiled.compiled
    text = program.partition.report()
    assert program.partition.saved and all(
        f"  {name}: " in text for name in program.partition.saved
    ), text
    assert "(16,)" in text
