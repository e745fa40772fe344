"""The ATen tracer on small functions: structure of the graph and numerics against eager."""

import operator

import pytest
import torch
import torch.fx as fx
from torch.utils._pytree import tree_leaves

from danlu_primtorch import FakeTensor, FakeTensorMode, format_graph, trace
from danlu_primtorch.tracing import AtenTracer

aten = torch.ops.aten


def op_targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def check_vals(gm):
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "call_function", "get_attr"):
            assert "val" in n.meta, n
            for v in tree_leaves(n.meta["val"]):
                if isinstance(v, torch.Tensor):
                    assert isinstance(v, FakeTensor), n
        if n.op == "call_function" and n.target is not operator.getitem:
            assert isinstance(n.target, torch._ops.OpOverload), n.target


def run_and_compare(fn, *args, atol=1e-5, **kw):
    gm = trace(fn, *args, **kw)
    check_vals(gm)
    got = gm(*tree_leaves(args))
    want = fn(*args)
    for g, w in zip(tree_leaves(got), tree_leaves(want), strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, atol=atol, rtol=1e-5)
        else:
            assert g == w
    return gm


def test_mlp_forward_and_backward_match_eager():
    torch.manual_seed(0)
    x = torch.randn(5, 4)
    w1, w2 = torch.randn(4, 8), torch.randn(8, 3)

    def f(x, w1, w2):
        w1 = w1.detach().requires_grad_()
        w2 = w2.detach().requires_grad_()
        y = torch.tanh(x @ w1) @ w2
        g1, g2 = torch.autograd.grad(y.square().sum(), [w1, w2])
        return y, g1, g2

    gm = run_and_compare(f, x, w1, w2)
    targets = op_targets(gm)
    assert aten.tanh_backward.default in targets  # the backward ran through the tracer


def test_noncontiguous_inputs_and_metadata():
    x = torch.randn(6, 8).t()[:, 1:]
    gm = run_and_compare(lambda x: (x * 2).sum(1), x)
    arg = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert arg.meta["val"].stride() == x.stride()


def test_inplace_and_views_recorded_faithfully():
    def f(x):
        y = x.clone()
        v = y[1:, ::2]
        v.mul_(3)  # writes through the view into y
        y.add_(1)
        return y, v.t()

    gm = run_and_compare(f, torch.randn(4, 6))
    targets = op_targets(gm)
    assert aten.mul_.Tensor in targets and aten.add_.Tensor in targets
    assert aten.slice.Tensor in targets and aten.t.default in targets


def test_inplace_on_input_is_kept():
    def f(x):
        x.add_(2)
        return x.sum()

    x = torch.randn(3)
    gm = trace(f, x.clone())
    y = x.clone()
    out = gm(y)
    torch.testing.assert_close(y, x + 2)
    torch.testing.assert_close(out, (x + 2).sum())


def test_scalars_multiple_outputs_pytrees_and_constants():
    const = torch.arange(6.0).view(2, 3)

    def f(inputs, scale):
        a, b = inputs["a"], inputs["pair"][1]
        made = torch.ones(2, 3) * 0.5 + torch.tensor([1.0, 2.0, 3.0])
        return {"sum": a * scale + b + const + made, "parts": (a.max(1), scale)}

    inputs = {"a": torch.randn(2, 3), "pair": (None, torch.randn(2, 3))}
    gm = run_and_compare(f, inputs, 2.5)
    assert any(n.op == "get_attr" for n in gm.graph.nodes)
    # max(dim) returns two tensors: recorded once, read through getitem
    assert aten.max.dim in op_targets(gm) and operator.getitem in op_targets(gm)


def test_real_tracing_matches_fake_tracing():
    x = torch.randn(3, 4)

    def f(x):
        return torch.softmax(x, -1).cumsum(0)

    fake_gm = trace(f, x)
    real_gm = trace(f, x, fake=False)
    assert op_targets(fake_gm) == op_targets(real_gm)
    check_vals(real_gm)
    torch.testing.assert_close(real_gm(x), f(x))


def test_decompositions_apply_recursively():
    calls = []

    def addcmul(x, a, b, value=1):
        calls.append("addcmul")
        return x + aten.mul.Tensor(a, b) * value  # mul is decomposed again below

    def mul(a, b):
        calls.append("mul")
        if not isinstance(b, torch.Tensor):
            return aten.div.Tensor(a, 1.0 / b)
        return aten.div.Tensor(a, aten.reciprocal.default(b))

    table = {aten.addcmul.default: addcmul, aten.mul.Tensor: mul}
    x, a, b = torch.randn(3), torch.randn(3), torch.rand(3) + 0.5
    gm = run_and_compare(
        lambda x, a, b: torch.addcmul(x, a, b, value=2.0), x, a, b, decompositions=table
    )
    targets = op_targets(gm)
    assert aten.addcmul.default not in targets and aten.mul.Tensor not in targets
    assert aten.reciprocal.default in targets
    assert calls.count("mul") == 2 and calls.count("addcmul") == 1


def test_tracer_subclass_can_rewrite_ops():
    class NoInplaceAdd(AtenTracer):
        def intercept(self, func, args, kwargs):
            if func is aten.add_.Tensor:
                out = self.call(aten.add.Tensor, args, kwargs)
                return self.call(aten.copy_.default, (args[0], out), {})
            return super().intercept(func, args, kwargs)

    def f(x):
        y = x * 1
        y.add_(x)
        return y

    x = torch.randn(4)
    gm = trace(f, x, tracer_class=NoInplaceAdd)
    assert aten.add_.Tensor not in op_targets(gm) and aten.copy_.default in op_targets(gm)
    torch.testing.assert_close(gm(x), f(x))


def test_fake_inputs_and_manual_tracer_use():
    mode = FakeTensorMode()
    with mode:
        x = torch.empty(2, 3, device="cuda")
    gm = trace(lambda x: (x + 1).relu(), x)
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"]
    assert all(v.device == torch.device("cuda", 0) for v in vals)

    tracer = AtenTracer(fake_mode=mode)
    with mode:
        y = torch.empty(4, 4)
    tracer.placeholder(y, "y")
    with mode, tracer:
        out = y.sin().sum(0)
    tracer.set_outputs(out)
    gm = tracer.graph_module()
    assert isinstance(gm, fx.GraphModule)
    assert op_targets(gm) == [aten.sin.default, aten.sum.dim_IntList]
    text = format_graph(gm)
    assert "aten.sin.default" in text and "f32[4, 4]" in text


def test_gradient_for_closed_over_real_tensor_is_refused_on_fakes():
    from danlu_primtorch.tracing import TracingError

    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)

    def f(x):
        lin(x).sum().backward()
        return lin.weight.grad

    with pytest.raises(TracingError, match="closes over"):
        trace(f, x)
    assert lin.weight.grad is None  # the real module was not touched
    assert not lin.weight._backward_hooks
    gm = trace(f, x, fake=False)  # on real tensors it is traced like eager
    lin.weight.grad = None
    torch.testing.assert_close(gm(x), f(x))


def test_data_dependent_error_propagates_out_of_trace():
    from danlu_primtorch import DataDependentOutputError

    with pytest.raises(DataDependentOutputError):
        trace(lambda x: x[x > 0].sum(), torch.randn(5))
