"""Programs that write to tensors: every graph handed to a compiler is functional, and the
caller sees eager's values in outputs and inputs."""

import pytest
import torch
from helpers import check

import danlu_aotautograd as da


def _functional(compiled):
    for c in compiled.compiled:
        graphs = [c.forward_graph] + ([c.partition.backward] if c.partition else [])
        for gm in graphs:
            for n in gm.graph.nodes:
                if isinstance(n.target, torch._ops.OpOverload):
                    schema = n.target._schema
                    written = [
                        a for a in schema.arguments if a.alias_info and a.alias_info.is_write
                    ]
                    assert not written, f"{n.target} writes in a compiled graph"


def test_index_put_and_masked_fill_inplace():
    def f(x, buf, idx):
        buf[idx] = x.detach().sum(0)
        y = x * 1.5
        y.masked_fill_(y > 1, 0.0)
        y[:, 1] += 3
        return y

    args = [torch.randn(5, 4, requires_grad=True), torch.zeros(6, 4), torch.tensor([0, 3])]
    compiled, _, _ = check(f, args)
    _functional(compiled)


def test_out_variant_and_copy_between_views():
    def f(x, out):
        torch.mul(x, 2, out=out)
        out[0].copy_(out[1])
        return out.sum()

    args = [torch.randn(3, 4), torch.empty(3, 4)]
    compiled, _, _ = check(f, args)
    _functional(compiled)


def test_foreach_optimizer_update():
    def step(params, grads, bufs):
        with torch.no_grad():
            torch._foreach_mul_(bufs, 0.9)
            torch._foreach_add_(bufs, grads)
            torch._foreach_add_(params, bufs, alpha=-0.1)

    params = [torch.randn(3, 2), torch.randn(4)]
    grads = [torch.randn(3, 2), torch.randn(4)]
    bufs = [torch.randn(3, 2), torch.randn(4)]
    compiled, _, _ = check(step, [params, grads, bufs])
    _functional(compiled)
    assert len(compiled.compiled[0].program.written_inputs) == 4


def test_views_of_views_and_regenerated_aliases():
    def f(x, w):
        y = x @ w
        a = y.view(2, 3, 4)
        b = a[1]  # view of a view
        c = y.t()  # another alias of the same memory
        b.mul_(w.sum())
        return c.sum(0), a, b

    args = [torch.randn(6, 5, requires_grad=True), torch.randn(5, 4, requires_grad=True)]
    compiled, (c, a, b), _ = check(f, args)
    _functional(compiled)
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_write_through_unbind_and_split_views():
    def f(x, acc):
        first, second = acc.unbind(0)
        first.add_(x.detach().sum())
        lo, hi = acc.split([1, 2], dim=1)
        hi.mul_(2)
        return acc * x.mean()

    args = [torch.randn(4, requires_grad=True), torch.randn(2, 3)]
    compiled, _, _ = check(f, args)
    _functional(compiled)


def test_write_through_data_attribute():
    def f(p, g):
        p.data.add_(g, alpha=-0.5)
        return p * 2

    check(f, [torch.randn(5, requires_grad=True), torch.randn(5)])


def test_inplace_with_dtype_promotion_keeps_dtype():
    def f(x, y):
        x.add_(y)  # float32 += float64 stays float32
        return x * 1

    compiled, out, _ = check(f, [torch.randn(4), torch.randn(4, dtype=torch.float64)])
    assert out.dtype == torch.float32


def test_inplace_on_input_with_history_is_refused():
    def f(x, w):
        x.mul_(w)
        return x

    x = torch.randn(3)
    w = torch.randn(3, requires_grad=True)
    with pytest.raises(da.AotNotSupported, match="autograd history"):
        da.aot_function(f, da.run_graph)(x, w)


def test_write_to_captured_constant_is_refused():
    state = torch.zeros(3)

    def f(x):
        state.add_(x)
        return x * 2

    with pytest.raises(da.AotNotSupported, match="captured from outside"):
        da.aot_function(f, da.run_graph)(torch.randn(3))
    assert torch.equal(state, torch.zeros(3))


def test_random_fills_keep_eager_rng_stream():
    def f(x):
        noise = torch.empty_like(x).normal_()
        u = torch.empty_like(x).uniform_(-1, 1)
        return x + noise * u + torch.rand_like(x)

    check(f, [torch.randn(64, requires_grad=True)])


def test_in_place_layout_change_is_refused():
    def f(x):
        x.t_()
        return x + 1

    with pytest.raises(da.AotNotSupported, match="shape or strides in place"):
        da.aot_function(f, da.run_graph)(torch.randn(3, 3))


def test_in_place_restride_that_moves_no_element_is_traced():
    # ATen pools a channels-last batch to 1x1 with a mean, then restrides the result in place
    # (as_strided_ on size-1 dims only): nothing moves, so the trace goes on
    def f(x):
        pooled = torch.nn.functional.adaptive_avg_pool2d(x.relu(), 1)
        return pooled.flatten(1) * 2

    x = torch.randn(4, 6, 5, 7).to(memory_format=torch.channels_last).requires_grad_()
    compiled, _, _ = check(f, [x])
    _functional(compiled)

    def g(x):  # a restride that does move elements is still refused
        y = x * 1
        y.as_strided_((3, 4), (1, 3))
        return y + 1

    with pytest.raises(da.AotNotSupported, match="shape or strides in place"):
        da.aot_function(g, da.run_graph)(torch.randn(4, 3))


def test_native_batch_norm_hidden_running_stat_writes_are_functionalized():
    # native_batch_norm updates running statistics in training without saying so in its schema
    def f(x, w, b, rm, rv):
        out, _, _ = torch.native_batch_norm(x, w, b, rm, rv, True, 0.2, 1e-5)
        return out.relu()

    args = [
        torch.randn(4, 3, 5, 5, requires_grad=True),
        torch.randn(3, requires_grad=True),
        torch.randn(3, requires_grad=True),
        torch.randn(3),
        torch.rand(3) + 0.5,
    ]
    compiled, _, _ = check(f, args)
    _functional(compiled)
    assert compiled.compiled[0].program.written_inputs == [3, 4]
    targets = {str(n.target) for n in compiled.compiled[0].forward_graph.graph.nodes}
    assert "aten.native_batch_norm.default" not in targets


def test_inplace_op_whose_overload_name_differs_from_its_twin():
    # pow_.Scalar takes (Tensor self, Scalar exponent): its out-of-place twin is
    # pow.Tensor_Scalar, not pow.Scalar (Scalar self, Tensor exponent)
    def f(x):
        y = x.abs() + 1
        y.pow_(2.5)
        z = x.abs() + 2
        z.float_power_(1.5)
        return y * x + z

    compiled, _, _ = check(f, [torch.randn(4, 5, dtype=torch.float64, requires_grad=True)])
    _functional(compiled)


def test_vector_norm_backward_traces():
    # the backward of a p-norm raises |x| to p - 2 in place
    check(lambda x: torch.linalg.vector_norm(x, 3, dim=0), [torch.randn(6, 5, requires_grad=True)])


def test_scatters_written_by_functionalization_take_the_decomposition_table():
    """Writes through views become scatters (and fill_ becomes fill): the tracer writes those
    ops itself, and they go through the decomposition table as traced ops do (a compiler saw
    slice_scatter/fill as library calls before: shifted-window attention's mask)."""
    _scatters_check("canonical")


def test_scatters_stay_without_a_decomposition_table():
    _scatters_check(None)


def _scatters_check(decompositions):
    def f(x):
        mask = x.new_zeros(6, 7)
        count = 0
        for h in ((0, -3), (-3, -1), (-1, None)):
            for w in ((0, -2), (-2, None)):
                mask[h[0] : h[1], w[0] : w[1]] = count
                count += 1
        y = x * 2
        y[1] = 5.0  # select_scatter
        y[:, 2:5].mul_(3)  # slice_scatter of a computed value
        return y + mask

    compiled, _, _ = check(
        f, [torch.randn(6, 7, requires_grad=True)], decompositions=decompositions
    )
    _functional(compiled)
    targets = {
        n.target
        for c in compiled.compiled
        for gm in [c.forward_graph] + ([c.partition.backward] if c.partition else [])
        for n in gm.graph.nodes
    }
    aten = torch.ops.aten
    scatters = {aten.slice_scatter.default, aten.select_scatter.default, aten.fill.Tensor}
    if decompositions == "canonical":
        assert not targets & scatters, targets & scatters
    else:
        assert targets & scatters  # without a table the scatters stay (a table is opt-in)


def test_write_back_batches_and_keeps_eager_semantics():
    # on every device at hand (the GPU machine runs the CUDA copies; no parameters, so the
    # dynamic-shape rerun of this file can call it too)
    for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        _check_write_back(dev)


def _check_write_back(dev):
    from danlu_aotautograd.runtime.compiled_function import write_back

    g = torch.Generator().manual_seed(0)
    # distinct buffers of three dtypes (a float32 value into a bfloat16 target), a scalar
    # value and a broadcast value: all land as copy_, one foreach copy per device and dtype
    targets = [
        torch.zeros(4),
        torch.zeros(3, 2),
        torch.zeros(3, 2, dtype=torch.bfloat16),
        torch.zeros((), dtype=torch.int64),
        torch.zeros(2, 3),
        torch.zeros(5),
    ]
    values = [
        torch.randn(4, generator=g),
        torch.randn(3, 2, generator=g),
        torch.randn(3, 2, generator=g),
        torch.tensor(7),
        torch.randn(3, generator=g),
        2.5,
    ]
    targets = [t.to(dev) for t in targets]
    values = [v.to(dev) if isinstance(v, torch.Tensor) else v for v in values]
    expected = [
        t.clone().copy_(v) if isinstance(v, torch.Tensor) else t.clone().fill_(v)
        for t, v in zip(targets, values)
    ]
    write_back(targets, values)
    for t, e in zip(targets, expected):
        assert torch.equal(t, e)
    # two targets that share memory: the later write wins, as with eager's in-place ops
    base = torch.zeros(6, device=dev)
    a, b = base[:4], base[2:]
    write_back([a, b], [torch.ones(4, device=dev), torch.full((4,), 2.0, device=dev)])
    assert base.tolist() == [1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    # a value that is another target's memory: read before that target is written
    x, y = torch.arange(3.0, device=dev), torch.zeros(3, device=dev)
    write_back([y, x], [x, torch.full((3,), 9.0, device=dev)])
    assert y.tolist() == [0.0, 1.0, 2.0] and x.tolist() == [9.0, 9.0, 9.0]
    # a value the compiler computed into its target (the target itself, or a new tensor of
    # the same memory): nothing to copy, but the target's version moves as eager's add_ did
    z, w = torch.arange(4.0, device=dev), torch.zeros(4, device=dev)
    versions = z._version, w._version
    write_back([z, w], [z.view(4), torch.ones(4, device=dev)])
    assert z.tolist() == [0.0, 1.0, 2.0, 3.0] and w.tolist() == [1.0] * 4
    assert z._version > versions[0] and w._version > versions[1]


def test_written_inputs_are_offered_to_the_compiler():
    # the forward graph tells its compiler which outputs are new values of which inputs
    seen = []

    def compiler(gm, examples):
        seen.append((gm.meta.get("shape_env") is not None, gm.meta.get("outputs_into_inputs")))
        return da.run_graph(gm, examples)

    def f(x, rm):
        rm.mul_(0.5).add_(x.detach().mean(0))
        return (x * 2).sum()

    x, rm = torch.randn(4, 3, requires_grad=True), torch.randn(3)
    expected = rm * 0.5 + x.detach().mean(0)
    out = da.aot_function(f, compiler, compiler)(x, rm)
    out.backward()
    torch.testing.assert_close(rm, expected)
    # output 1 (after the loss) is input 1's new value; symbolic programs (the dynamic rerun
    # of this file) offer nothing: their inputs' layouts are not promised
    dynamic, offered = seen[0]
    assert offered == (None if dynamic else {1: 1}), seen


def test_batch_norm_running_stats_after_compiled_training_steps():
    bn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.BatchNorm2d(4)
    )
    ref = __import__("copy").deepcopy(bn)
    compiled = da.aot_module(bn, da.run_graph)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(2, 3, 8, 8, generator=g)
        compiled(x).sum().backward()
        ref(x).sum().backward()
    for (name, b), (_, r) in zip(bn.named_buffers(), ref.named_buffers()):
        torch.testing.assert_close(b, r, msg=name)
