"""aot_function against eager on small programs: both partitioners, random inputs."""

import pytest
import torch
import torch.nn.functional as F
from helpers import check

import danlu_aotautograd as da

PARTITIONERS = [da.default_partition, da.min_cut_partition]


@pytest.fixture(autouse=True)
def _seed(request):
    torch.manual_seed(hash(request.node.name) % 2**31)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_mlp(partition_fn):
    def mlp(x, w1, b1, w2, b2):
        h = F.gelu(x @ w1 + b1)
        return torch.tanh(h @ w2 + b2).sum(-1)

    args = [
        torch.randn(8, 16),
        torch.randn(16, 32, requires_grad=True),
        torch.randn(32, requires_grad=True),
        torch.randn(32, 4, requires_grad=True),
        torch.randn(4, requires_grad=True),
    ]
    check(mlp, args, partition_fn)


def test_float64_reference():
    def f(x, w):
        return torch.nn.functional.softplus(x @ w).log1p().mean()

    x = torch.randn(32, 64, dtype=torch.float64, requires_grad=True)
    w = torch.randn(64, 64, dtype=torch.float64, requires_grad=True)
    check(f, [x, w], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_non_contiguous_inputs(partition_fn):
    def f(x, y):
        return (x * y.sin()).cumsum(0), x.t() @ y

    base = torch.randn(12, 10)
    x = base[::2, 1:7].requires_grad_()  # strided, offset view
    y = torch.randn(6, 6).t().requires_grad_()
    assert not x.is_contiguous() and not y.is_contiguous()
    check(f, [x.detach().requires_grad_(), y.detach().requires_grad_()], partition_fn)


def test_mixed_requires_grad_and_non_tensor_outputs():
    def f(x, w, scale: float, idx):
        y = x @ w * scale
        return {"y": y, "n": 3, "none": None, "argmax": y.argmax(-1), "const": idx + 1}

    args = [torch.randn(5, 4), torch.randn(4, 3, requires_grad=True), 0.5, 7]
    compiled, actual, _ = check(f, args)
    assert actual["argmax"].dtype == torch.int64 and not actual["argmax"].requires_grad


def test_output_that_does_not_require_grad():
    def f(x, y):
        return x * 2, y + 1, (x * y).sum()

    check(f, [torch.randn(3, requires_grad=True), torch.randn(3)])


def test_differentiable_output_left_without_gradient():
    # the loss reads one of two differentiable outputs: the other's tangent is zeros
    def f(x, w):
        y = x @ w
        return y.tanh(), (y * 3).exp()

    torch.manual_seed(0)
    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    compiled = da.aot_function(f, da.run_graph)
    a, _ = compiled(x, w)
    a.sum().backward()
    w2 = w.detach().clone().requires_grad_()
    ea, _ = f(x, w2)
    ea.sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)
    w.grad = None
    _, b = compiled(x, w)
    b.sum().backward()
    w2.grad = None
    f(x, w2)[1].sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)


def test_input_mutation_applied_after_call():
    def f(x, stats, counter):
        stats.mul_(0.9).add_(x.detach().mean(0) * 0.1)
        counter.add_(1)
        return (x * stats).sum()

    args = [
        torch.randn(6, 4, requires_grad=True),
        torch.randn(4),
        torch.zeros((), dtype=torch.long),
    ]
    compiled, _, _ = check(f, args)
    assert compiled.compiled[0].program.written_inputs == [1, 2]
    for node in compiled.compiled[0].partition.forward.graph.nodes:
        assert not str(node.target).endswith("_.Tensor"), "graph must be functional"


def test_mutation_through_views():
    def f(x, buf):
        v = buf[1:3]  # view of an input
        v.add_(x.sum(0).detach())
        col = buf[:, 0]
        col.zero_()
        y = x.clone()
        y.t()[0].mul_(2)  # write through a transposed view of an intermediate
        return y * buf.sum()

    args = [torch.randn(4, 3, requires_grad=True), torch.randn(5, 3)]
    compiled, _, _ = check(f, args)
    graph = compiled.compiled[0].partition.forward
    targets = {str(n.target) for n in graph.graph.nodes}
    assert "aten.slice_scatter.default" in targets and "aten.select_scatter.default" in targets


def test_view_outputs_alias_like_eager():
    def f(x, w):
        y = x @ w
        return y.view(-1), y[0], x.t(), x

    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    compiled, actual, _ = check(f, [x, w])
    y_flat, y0, xt, x_out = actual
    assert y0._base is not None and y_flat._base is not None
    assert y0.untyped_storage().data_ptr() == y_flat.untyped_storage().data_ptr()
    assert (
        x_out is not None and xt.untyped_storage().data_ptr() == x_out.untyped_storage().data_ptr()
    )


def test_returned_input_is_the_same_object():
    def f(x, y):
        y.add_(1)
        return x, y, x * 2

    x, y = torch.randn(3), torch.randn(3)
    compiled = da.aot_function(f, da.run_graph)
    a, b, _ = compiled(x, y)
    assert a is x and b is y


def test_inference_under_no_grad_saves_nothing():
    calls = []

    def inference_compiler(gm, example_inputs):
        calls.append(gm)
        return gm

    def f(x, w):
        return torch.relu(x @ w)

    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    compiled = da.aot_function(f, da.run_graph, inference_compiler=inference_compiler)
    with torch.no_grad():
        out = compiled(x, w)
    assert not out.requires_grad
    torch.testing.assert_close(out, f(x, w).detach())
    assert len(calls) == 1 and compiled.compiled[0].partition is None
    assert compiled.compiled[0].backward is None


def test_double_backward_is_a_clear_error():
    def f(x):
        return (x.sin() * x).sum()

    x = torch.randn(5, requires_grad=True)
    out = da.aot_function(f, da.run_graph)(x)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out, x, create_graph=True)
    out = da.aot_function(f, da.run_graph)(x)
    (g,) = torch.autograd.grad(out, x)  # first order still works
    torch.testing.assert_close(g, x.detach().cos() * x.detach() + x.detach().sin())


def test_dropout_masks_match_eager():
    def f(x, w):
        h = F.dropout(x @ w, p=0.4, training=True)
        return F.dropout(h.relu(), p=0.2).sum(-1)

    args = [torch.randn(16, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)]
    for partition_fn in PARTITIONERS:
        compiled, _, _ = check(f, args, partition_fn)
        bw = compiled.compiled[0].partition.backward
        assert not any("bernoulli" in str(n.target) for n in bw.graph.nodes)


def test_retrace_on_new_shapes_and_grad_modes():
    def f(x):
        return x.exp().sum(0)

    compiled = da.aot_function(f, da.run_graph)
    for shape in [(3, 4), (5, 2), (3, 4)]:
        x = torch.randn(shape, requires_grad=True)
        compiled(x).sum().backward()
        torch.testing.assert_close(x.grad, x.detach().exp())
    assert len(compiled.compiled) == 2


def test_data_dependent_program_is_a_clear_error():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x

    with pytest.raises(da.AotNotSupported, match="needs tensor data"):
        da.aot_function(f, da.run_graph)(torch.randn(3, requires_grad=True))


def test_closure_parameter_is_a_clear_error():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        return x * w

    with pytest.raises(da.AotNotSupported, match="not an input"):
        da.aot_function(f, da.run_graph)(torch.randn(3))


def test_decompositions_are_applied():
    aten = torch.ops.aten
    calls = []

    def silu(x):
        calls.append(1)
        return x * torch.sigmoid(x)

    def f(x):
        return F.silu(x).sum()

    x = torch.randn(6, requires_grad=True)
    compiled = da.aot_function(f, da.run_graph, decompositions={aten.silu.default: silu})
    check(f, [x], decompositions={aten.silu.default: silu})
    compiled(x)
    targets = {n.target for n in compiled.compiled[0].program.graph_module.graph.nodes}
    assert aten.silu.default not in targets and aten.sigmoid.default in targets and calls


def test_canonical_decompositions_from_primtorch():
    def f(x, y):
        return (x + 2.5 * y).sum()

    check(f, [torch.randn(4, requires_grad=True), torch.randn(4)], decompositions="canonical")


def test_printing_shows_all_graphs():
    def f(x, w):
        return (x @ w).relu().sum()

    compiled = da.aot_function(f, da.run_graph)
    compiled(torch.randn(2, 3, requires_grad=True), torch.randn(3, 4, requires_grad=True))
    text = da.format_aot(compiled)
    for title in ("joint graph:", "forward graph:", "backward graph:", "saved for backward"):
        assert title in text
    assert "aten.mm.default" in text and "tangents_0" in text


def test_decomposition_that_returns_a_view_keeps_gradients():
    aten = torch.ops.aten

    def embedding(weight, ids, *args):
        return weight.index_select(0, ids.reshape(-1)).view(*ids.shape, weight.shape[1])

    def f(ids, weight):
        return F.embedding(ids, weight) * 2

    args = [torch.randint(0, 10, (3, 4)), torch.randn(10, 5, requires_grad=True)]
    check(f, args, decompositions={aten.embedding.default: embedding})


def test_decomposition_that_returns_its_input_gives_a_fresh_tensor():
    aten = torch.ops.aten

    def f(x):
        y = x.clone()
        y.add_(1)
        return y

    x = torch.randn(4)
    compiled = da.aot_function(
        f, da.run_graph, decompositions={aten.clone.default: lambda t, **kw: t}
    )
    out = compiled(x)
    torch.testing.assert_close(out, x + 1)
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_positional_tensors_reuse_one_compile_per_signature():
    # a flat list of tensors keys the cache by its count, not by walking its pytree spec:
    # calls with the same shapes hit, a different count or a nested structure compiles anew
    def f(*xs):
        return sum(x.sin() for x in xs)

    compiled = da.aot_function(f, da.run_graph)
    aot = getattr(compiled, "aot", compiled)
    torch.manual_seed(5)
    a, b, c = (torch.randn(3, 4) for _ in range(3))
    for _ in range(3):
        torch.testing.assert_close(compiled(a, b), f(a, b))
    assert aot.stats["traces"] == 1
    torch.testing.assert_close(compiled(a, b, c), f(a, b, c))
    assert aot.stats["traces"] == 2

    def g(pair, x):
        return pair[0] * pair[1] + x

    compiled_g = da.aot_function(g, da.run_graph)
    torch.testing.assert_close(compiled_g((a, b), c), g((a, b), c))
    torch.testing.assert_close(compiled_g([a, b], c), g([a, b], c))
