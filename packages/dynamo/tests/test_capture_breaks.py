"""Graph breaks: correctness across breaks, explain's report, fullgraph errors, fallbacks."""

import logging

import pytest
import torch

import danlu_dynamo


def _check(fn, *args):
    ref = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    opt = danlu_dynamo.optimize("eager")(fn)
    for _ in range(2):
        got = opt(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        assert torch.equal(ref, got) if isinstance(ref, torch.Tensor) else ref == got
    return danlu_dynamo.explain(fn)(*args)


def brk_print(x):
    y = x * 2
    print("side effect")
    return y + 1


def brk_data_dependent_if(x):
    y = x.sin()
    if y.sum() > 0:
        return y * 2
    return y - 2


def brk_item(x):
    n = x.max().item()
    return x / (abs(n) + 1)


def brk_in_loop(x):
    for _i in range(3):
        x = x * 2
        if x.mean() > 100:
            x = x - 1
    return x


def brk_in_with_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("inside")
        z = y + 1
    return z * x


def brk_in_try(x):
    try:
        y = x + 1
        print("in try")
        raise ValueError("boom")
    except ValueError:
        y = y * 3
    return y


def brk_nested_call_helper(t):
    t = t + 1
    print("nested")
    return t * 2


def brk_nested_call(x):
    y = x.cos()
    z = brk_nested_call_helper(y)
    return z - y


def brk_tolist(x):
    vals = x[0].tolist()
    return x * len(vals)


def brk_nonzero(x):
    idx = torch.nonzero(x > 0)
    return idx.shape[0] + x.sum()


def brk_generator_in_frame(x):
    def gen():
        yield x * 2
        yield x * 3

    total = x
    for t in gen():
        total = total + t
    return total


def test_print_break_runs_and_reports(capsys):
    x = torch.randn(4, 4)
    e = _check(brk_print, x)
    assert e.graph_break_count == 1
    assert "print" in e.break_reasons[0].reason
    assert e.break_reasons[0].user_loc.endswith(
        f"test_capture_breaks.py:{brk_print.__code__.co_firstlineno + 2}"
    )
    assert e.graph_count == 2
    assert capsys.readouterr().out.count("side effect") == 4


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_data_dependent_branch_both_ways(sign):
    x = torch.rand(3, 3) * sign + 0.01 * sign
    e = _check(brk_data_dependent_if, x)
    assert e.graph_break_count == 1
    assert "data-dependent" in e.break_reasons[0].reason


def test_item_breaks():
    e = _check(brk_item, torch.randn(5))
    assert e.graph_break_count >= 1
    assert any("item" in b.reason for b in e.break_reasons)


def test_break_inside_loop():
    e = _check(brk_in_loop, torch.randn(4))
    assert e.graph_break_count >= 3


def test_break_inside_with_block_is_correct():
    x = torch.randn(3, requires_grad=True)
    ref = brk_in_with_no_grad(x)
    got = danlu_dynamo.optimize("eager")(brk_in_with_no_grad)(x)
    assert torch.equal(ref, got) and got.requires_grad == ref.requires_grad
    assert torch.is_grad_enabled()


def test_break_inside_try_except():
    _check(brk_in_try, torch.randn(3))


def test_break_in_nested_function_compiles_callee():
    e = _check(brk_nested_call, torch.randn(3))
    assert e.graph_break_count >= 2  # at the call in the caller, at print in the callee
    assert any("print" in b.reason for b in e.break_reasons)


def test_tolist_and_nonzero_break():
    _check(brk_tolist, torch.randn(3, 4))
    e = _check(brk_nonzero, torch.randn(3, 4))
    assert e.graph_break_count >= 1


def test_generator_defined_in_frame():
    _check(brk_generator_in_frame, torch.randn(3))


def test_fullgraph_raises_with_reason_and_location():
    opt = danlu_dynamo.optimize("eager", fullgraph=True)(brk_print)
    with pytest.raises(danlu_dynamo.GraphBreakError) as ei:
        opt(torch.randn(2))
    msg = str(ei.value)
    assert (
        "print" in msg and f"test_capture_breaks.py:{brk_print.__code__.co_firstlineno + 2}" in msg
    )


def test_fullgraph_ok_without_breaks():
    def f(x):
        return (x * 2).relu()

    x = torch.randn(4)
    assert torch.equal(danlu_dynamo.optimize("eager", fullgraph=True)(f)(x), f(x))


def test_graph_break_logging(caplog):
    with caplog.at_level(logging.INFO, logger="danlu_dynamo"):
        danlu_dynamo.optimize("eager")(brk_print)(torch.randn(2))
    assert any(
        r.name == "danlu_dynamo.graph_breaks" and "print" in r.getMessage() for r in caplog.records
    )
    assert any(r.name == "danlu_dynamo.graph" for r in caplog.records)


def test_explain_str_is_readable():
    e = danlu_dynamo.explain(brk_print)(torch.randn(2))
    s = str(e)
    assert "Graph count: 2" in s and "Graph break count: 1" in s and "print" in s
    assert e.capture_time > 0
    assert e.ops_per_graph[0] == ["_operator.mul"]


def test_backend_receives_graph_module_and_example_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        assert all(isinstance(t, torch.Tensor) for t in example_inputs)
        for n in gm.graph.nodes:
            if n.op not in ("placeholder", "output"):
                assert "val" in n.meta
        return gm.forward

    def f(x, y):
        return torch.nn.functional.linear(x, y).relu()

    x, y = torch.randn(2, 3), torch.randn(4, 3)
    out = danlu_dynamo.optimize(backend)(f)(x, y)
    assert torch.equal(out, f(x, y))
    assert len(seen) == 1
    gm, ex = seen[0]
    assert torch.equal(gm(*ex)[0], f(x, y))


def test_dynamic_must_be_none_or_bool():
    with pytest.raises(TypeError):
        danlu_dynamo.optimize("eager", dynamic="yes")


def test_unknown_backend_name():
    with pytest.raises(ValueError):
        danlu_dynamo.optimize("nope")


def _fullgraph_reason(fn, *args):
    with pytest.raises(danlu_dynamo.GraphBreakError) as ei:
        danlu_dynamo.optimize("eager", fullgraph=True)(fn)(*args)
    return str(ei.value)


def test_torch_internals_and_callbacks_are_not_recorded_as_ops():
    torch.manual_seed(0)
    x = torch.randn(3, 4)

    def internal(t):  # a Python helper of a private torch module, not exported: machinery
        return torch._utils._flatten_dense_tensors([t, t * 2]) + 1

    def callback(t):  # a torch function handed a Python function runs it itself
        return torch.autograd.functional.jacobian(lambda u: u.sin().sum(0), t) * 2

    assert "_flatten_dense_tensors is not captured" in _fullgraph_reason(internal, x)
    assert "jacobian is not captured" in _fullgraph_reason(callback, x)
    for fn in (internal, callback):
        torch.testing.assert_close(danlu_dynamo.optimize("eager")(fn)(x), fn(x))
    # what torch exports from a private module is an op like any other
    from danlu_dynamo.capture.variables.torch_functions import _internal

    assert not _internal(torch.pca_lowrank, torch.pca_lowrank.__module__)
    assert _internal(torch._utils._flatten_dense_tensors, "torch._utils")


def test_explain_has_the_fields_of_torch_dynamo_explain():
    import torch

    def f(x):
        y = x.sin()
        print("side effect")
        return y.cos() + 1

    ours = danlu_dynamo.explain(f)(torch.randn(3))
    theirs = torch._dynamo.explain(f)(torch.randn(3))
    torch._dynamo.reset()
    fields = ("graphs", "graph_count", "graph_break_count", "break_reasons", "op_count")
    fields += ("ops_per_graph", "out_guards", "compile_times")
    for name in fields:
        assert hasattr(theirs, name), name  # the reference still has it
        assert getattr(ours, name) is not None, name
    assert (ours.graph_count, ours.graph_break_count) == (
        theirs.graph_count,
        theirs.graph_break_count,
    )
    assert ours.op_count == 3  # sin, cos, add (torch counts its own way)
    assert "Compile times:" in str(ours)
