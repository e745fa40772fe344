"""Tracing with symbolic sizes: graphs whose sizes are computed from their inputs, re-run at
other sizes against eager, with and without decompositions; guards from branches."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from test_trace_models import BasicBlock, TransformerBlock, forward_backward, forward_only, state_of
from torch.utils._pytree import tree_leaves

from danlu_primtorch import FakeTensorMode, decomposition_table, format_graph, trace
from danlu_primtorch.symbolic import ShapeEnv

aten = torch.ops.aten


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.head(x.mean((2, 3))).log_softmax(-1)


def values_of(tensors_by_source):
    """``{"argN.size(d)": n, "argN.stride(d)": s}`` for run-time inputs."""
    out = {}
    for src, t in tensors_by_source.items():
        for d in range(t.dim()):
            out[f"{src}.size({d})"] = t.shape[d]
            out[f"{src}.stride({d})"] = t.stride(d)
    return out


def trace_and_rerun(module, x, dims, new_shapes, decompositions, shape_env=None, atol=1e-5):
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    state = {k: v.detach().clone() for k, v in state.items()}
    n = len(tree_leaves(state))
    gm = trace(
        forward_only(module),
        state,
        x,
        decompositions=decompositions,
        dynamic={n: dims},
        shape_env=shape_env,
    )
    env = gm.meta["shape_env"]
    assert env is not None
    for node in gm.graph.nodes:
        if node.op != "output":
            assert "val" in node.meta, node.format_node()
    for shape in new_shapes:
        x2 = torch.randn(shape)
        failed = env.failed_guards(values_of({f"arg{n}": x2}))
        assert not failed, (shape, failed)
        got = gm(*tree_leaves((state, x2)))
        torch.testing.assert_close(got, forward_only(module)(state, x2), atol=atol, rtol=1e-4)
    return gm, env


LEVELS = [None, "canonical", "prims"]


@pytest.mark.parametrize("level", LEVELS, ids=["aten", "canonical", "prims"])
def test_transformer_symbolic_batch_and_seq(level):
    torch.manual_seed(0)
    table = decomposition_table(level) if level else None
    gm, env = trace_and_rerun(
        TransformerBlock().eval(),
        torch.randn(2, 6, 32),
        [0, 1],
        [(3, 5, 32), (4, 17, 32), (2, 2, 32), (5, 11, 32)],
        table,
    )
    assert not env.guards, env.format_guards()  # nothing in the block branches on b or t
    # the view/reshape shapes and the causal mask's size are computed from the input
    assert aten.sym_size.int in {node.target for node in gm.graph.nodes}
    # batch 1 is outside the traced range (sizes 0/1 are specialised): the guards say so
    assert not env.evaluate_guards(values_of({"arg12": torch.randn(1, 6, 32)}))


@pytest.mark.parametrize("level", LEVELS, ids=["aten", "canonical", "prims"])
def test_convnet_symbolic_batch_and_spatial(level):
    torch.manual_seed(0)
    table = decomposition_table(level) if level else None
    trace_and_rerun(
        SmallConvNet().eval(),
        torch.randn(2, 3, 16, 20),
        [0, 2, 3],
        [(3, 3, 12, 28), (5, 3, 32, 8), (2, 3, 9, 13)],
        table,
        shape_env=ShapeEnv(duck_shape=False),
    )


def test_resnet_block_symbolic_with_duck_sizing():
    torch.manual_seed(0)
    # duck sizing: H == W share a symbol, so the graph serves square inputs only
    gm, env = trace_and_rerun(
        BasicBlock().eval(),
        torch.randn(2, 8, 10, 10),
        [0, 2, 3],
        [(3, 8, 7, 7), (4, 8, 5, 5)],
        decomposition_table("canonical"),
    )
    assert not env.evaluate_guards(values_of({"arg12": torch.randn(2, 8, 12, 9)}))


def test_transformer_forward_backward_symbolic():
    torch.manual_seed(0)
    module = TransformerBlock().train()
    params, buffers = state_of(module)
    x = torch.randn(2, 6, 32, requires_grad=True)
    n = len(tree_leaves((params, buffers)))
    gm = trace(
        forward_backward(module),
        params,
        buffers,
        x,
        decompositions=decomposition_table("canonical"),
        dynamic={n: [0, 1]},
    )
    env = gm.meta["shape_env"]
    for b, t in ((3, 5), (2, 9)):
        x2 = torch.randn(b, t, 32, requires_grad=True)
        assert env.evaluate_guards(values_of({f"arg{n}": x2}))
        got = gm(*tree_leaves((params, buffers, x2)))
        want = forward_backward(module)(params, buffers, x2)
        for g, w in zip(tree_leaves(got), tree_leaves(want)):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_branch_on_size_becomes_guard_and_graph_follows_traced_branch():
    def f(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1

    gm = trace(f, torch.randn(20, 3), dynamic=True)
    env = gm.meta["shape_env"]
    assert [str(g) for g in env.guards] == ["arg0.size(0) > 16"]
    assert not env.evaluate_guards(values_of({"arg0": torch.randn(12, 3)}))
    assert env.evaluate_guards(values_of({"arg0": torch.randn(30, 3)}))
    x = torch.randn(30, 3)
    torch.testing.assert_close(gm(x), f(x))


def test_size_arithmetic_recorded_as_nodes():
    def f(x, y):
        z = x.reshape(x.shape[0] * x.shape[1], -1) @ y
        return z.view(x.shape[0], -1, z.shape[-1]).sum(1), x.shape[0] // 2

    x, y = torch.randn(4, 6, 8), torch.randn(8, 5)
    gm = trace(f, x, y, dynamic=[True, False])
    text = format_graph(gm)
    assert "aten.sym_size.int(%arg0, 0)" in text and "mul(" in text and "floordiv(" in text
    for shape in ((3, 7, 8), (9, 2, 8)):
        x2 = torch.randn(shape)
        got = gm(x2, y)
        want = f(x2, y)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


def test_float_factors_of_sizes_are_not_truncated():
    # sympy keeps ``s0 * 2.5`` as a Float coefficient: the graph must multiply by 2.5, not 2
    def f(x):
        return x * (x.shape[0] * 0.5) + (x.shape[0] * 2.5 + 1) / (x.shape[0] * 0.25)

    gm = trace(f, torch.randn(4, 3), dynamic=[True])
    for n in (3, 5, 8):
        x = torch.randn(n, 3)
        torch.testing.assert_close(gm(x), f(x))


def test_dynamic_needs_fake():
    with pytest.raises(ValueError, match="fake"):
        trace(lambda x: x + 1, torch.randn(3), fake=False, dynamic=True)


def test_symbolic_fakes_and_symint_inputs_from_a_caller():
    # What a capture layer hands over: fakes of its own mode (symbolic sizes, its sources)
    # and a SymInt input; the tracer reads symbols from those placeholders.
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    x = mode.from_real(torch.randn(6, 4), dynamic_dims=[0], source="L['x']")

    def f(x, n):  # n: a SymInt input
        return x.new_zeros(n * 2, 4) + x.repeat(2, 1)

    gm = trace(f, x, x.shape[0])
    vals = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    assert vals[0] is x and str(vals[1]) == "s0"
    assert gm.meta["shape_env"] is env
    for rows in (3, 9):
        x2 = torch.randn(rows, 4)
        torch.testing.assert_close(gm(x2, rows), f(x2, rows))
    assert "L['x'].size(0)" in env.format_guards()


class AvgPoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        # avg_pool2d clamps window indices to size - 1: a symbolic number as a clamp bound
        y = F.avg_pool2d(F.relu(self.conv(x)), 2)
        return y.clamp(max=x.shape[-1] - 1).mean((2, 3))


@pytest.mark.parametrize("level", ["canonical", "prims"])
def test_symbolic_number_as_an_op_argument(level):
    torch.manual_seed(0)
    trace_and_rerun(
        AvgPoolNet().eval(),
        torch.randn(2, 3, 16, 20),
        [0, 2, 3],
        [(3, 3, 12, 28), (5, 3, 32, 8), (2, 3, 9, 13)],
        decomposition_table(level),
        shape_env=ShapeEnv(duck_shape=False),
    )
