"""Fake tensors with symbolic sizes: from_real, propagation through ATen ops, guards recorded
by meta kernels, data-dependent ops still refused."""

import pytest
import torch

from danlu_primtorch import DataDependentOutputError, FakeTensorMode
from danlu_primtorch.symbolic import ShapeEnv, sym_expr


def make(*shapes, dims=(0,), duck=True):
    env = ShapeEnv(duck_shape=duck)
    mode = FakeTensorMode(shape_env=env)
    fakes = [
        mode.from_real(torch.randn(*s), dynamic_dims=dims, source=f"x{i}")
        for i, s in enumerate(shapes)
    ]
    return env, mode, fakes


def exprs(t):
    return [str(sym_expr(s)) for s in t.shape]


def test_from_real_symbolic_sizes_and_strides():
    env, mode, (x,) = make((8, 6, 16), dims=(0, 1))
    assert exprs(x) == ["s0", "s1", "16"]
    assert [str(sym_expr(s)) for s in x.stride()] == ["16*s1", "16", "1"]
    text = env.format_guards()
    assert "x0.size(2) == 16" in text and "x0.stride(0) == 16*x0.size(1)" in text
    # non-contiguous input: a stride that does not follow from the sizes gets its own symbol
    t = torch.randn(10, 23)[:, ::2]  # sizes (10, 12), strides (23, 2)
    y = mode.from_real(t, dynamic_dims=[0, 1], source="y")
    assert exprs(y) == ["s2", "s3"] and y.stride(1) == 2
    assert (
        str(sym_expr(y.stride(0))) == "s4" and env.source_of(sym_expr(y.stride(0))) == "y.stride(0)"
    )
    assert env.evaluate_guards(
        {
            **{f"x0.size({d})": n for d, n in enumerate((3, 5, 16))},
            **{f"x0.stride({d})": s for d, s in enumerate((80, 16, 1))},
            "y.size(0)": 4,
            "y.size(1)": 7,
            "y.stride(0)": 13,
            "y.stride(1)": 2,
        }
    )


def test_dynamic_dims_needs_shape_env():
    with pytest.raises(ValueError, match="shape_env"):
        FakeTensorMode().from_real(torch.randn(3, 4), dynamic_dims=[0])


def test_ops_propagate_symbols():
    env, mode, (x,) = make((8, 6, 16), dims=(0, 1))
    w = mode.from_real(torch.randn(16, 4))  # static
    with mode:
        y = x @ w[:, :3]
        assert exprs(y) == ["s0", "s1", "3"]
        assert exprs(y.view(-1, 3)) == ["s0*s1", "3"]
        assert exprs(x.reshape(x.shape[0], -1)) == ["s0", "16*s1"]
        assert exprs(x.transpose(0, 1).contiguous()) == ["s1", "s0", "16"]
        assert exprs(torch.cat([x, x], 0)) == ["2*s0", "s1", "16"]
        assert exprs(x.sum(1)) == ["s0", "16"]
        assert exprs(x.mean((0, 1), keepdim=True)) == ["1", "1", "16"]
        assert exprs(x.softmax(-1)) == ["s0", "s1", "16"]
        assert exprs(x[:, None].expand(-1, 3, -1, -1)) == ["s0", "3", "s1", "16"]
        assert exprs(x[1:]) == ["s0 - 1", "s1", "16"]
        assert exprs(x[..., ::2]) == ["s0", "s1", "8"]
        assert exprs(torch.nn.functional.layer_norm(x, (16,))) == ["s0", "s1", "16"]
        e = torch.nn.functional.embedding(torch.zeros(x.shape[0], dtype=torch.long), w)
        assert exprs(e) == ["s0", "4"]
        assert exprs(torch.zeros(x.shape[0] * 2, 5)) == ["2*s0", "5"]
        assert exprs(torch.arange(x.shape[1])) == ["s1"]
    assert not env.guards  # none of these branch on the sizes


def test_conv_and_pool_propagate_symbols():
    env, mode, (x,) = make((2, 3, 10, 12), dims=(0, 2, 3), duck=False)
    with mode:
        w = torch.randn(4, 3, 3, 3)
        y = torch.nn.functional.conv2d(x, w, padding=1, stride=2)
        z = torch.nn.functional.max_pool2d(y, 2)
    assert exprs(y)[:2] == ["s0", "4"]
    for n, (sym_out, real) in enumerate(zip(y.shape, (2, 4, 5, 6))):
        assert env.hint_of(sym_expr(sym_out)) == real, n
    assert [env.hint_of(sym_expr(s)) for s in z.shape] == [2, 4, 2, 3]


def test_meta_kernel_checks_become_guards():
    env, mode, (x, y) = make((8, 4), (8, 4), duck=False)
    with mode:
        z = x + y  # broadcasting needs s0 == s1 (or one of them 1)
    assert exprs(z) == ["s0", "4"]
    assert any("x1.size(0)" in str(g) and "x0.size(0)" in str(g) for g in env.guards)
    vals = {"x0.size(1)": 4, "x1.size(1)": 4, "x0.stride(0)": 4, "x1.stride(0)": 4}
    vals.update({"x0.stride(1)": 1, "x1.stride(1)": 1})
    assert env.evaluate_guards({**vals, "x0.size(0)": 5, "x1.size(0)": 5})
    assert not env.evaluate_guards({**vals, "x0.size(0)": 5, "x1.size(0)": 6})


def test_python_branch_on_size_is_guarded():
    env, mode, (x,) = make((20, 4))
    with mode:
        y = x * 2 if x.shape[0] > 16 else x - 1
    assert [str(g) for g in env.guards] == ["x0.size(0) > 16"]
    assert y.shape[0] == x.shape[0]


def test_data_dependent_ops_still_raise():
    env, mode, (x,) = make((8, 4))
    with mode:
        with pytest.raises(DataDependentOutputError):
            torch.nonzero(x)
        with pytest.raises(DataDependentOutputError):
            x[x > 0]
        with pytest.raises(DataDependentOutputError):
            x.sum().item()


def test_backward_on_symbolic_fakes():
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    x = mode.from_real(torch.randn(6, 5, requires_grad=True), dynamic_dims=[0], source="x")
    w = mode.from_real(torch.randn(5, 3, requires_grad=True))
    with mode:
        (x @ w).tanh().sum().backward()
    assert exprs(x.grad) == ["s0", "5"] and exprs(w.grad) == ["5", "3"]
