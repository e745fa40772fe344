"""0-dim CPU values inside a CUDA graph (a Python int written into a mask slice, a
decomposition's ``scalar_tensor(..., device="cpu")``) are rebuilt on the CUDA device, so the
graph compiles instead of running eagerly for spanning two devices. Fake CUDA tensors: no GPU
needed to check the rewrite."""

from __future__ import annotations

import torch

from danlu_inductor.passes import move_cpu_scalars
from danlu_inductor.pipeline.steps import choose_backend
from danlu_primtorch import FakeTensorMode

aten = torch.ops.aten


def _graph(extra_cpu_tensor=False, return_scalar=False):
    """x (fake CUDA) -> fill a slice with a CPU constant, add a CPU scalar_tensor."""
    mode = FakeTensorMode()
    g = torch.fx.Graph()
    root = torch.nn.Module()
    root._tensor_constant0 = torch.tensor(3.0)  # what mask[a:b] = 3 records
    with mode:
        xv = torch.empty(4, 6, device="cuda")
        cv = mode.from_real(root._tensor_constant0)
        x = g.placeholder("x")
        x.meta["val"] = xv
        c = g.get_attr("_tensor_constant0")
        c.meta["val"] = cv
        s = g.call_function(aten.slice.Tensor, (x, 1, 0, 3))
        s.meta["val"] = xv[:, 0:3]
        f = g.call_function(aten.fill.Tensor, (s, c))
        f.meta["val"] = torch.empty(4, 3, device="cuda")
        z = g.call_function(aten.scalar_tensor.default, (0.5,), {"device": torch.device("cpu")})
        z.meta["val"] = torch.empty((), device="cpu")
        out = g.call_function(aten.add.Tensor, (f, z))
        out.meta["val"] = torch.empty(4, 3, device="cuda")
        outs = [out]
        if extra_cpu_tensor:
            v = g.call_function(aten.ones.default, ([3],), {"device": torch.device("cpu")})
            v.meta["val"] = torch.empty(3, device="cpu")
            outs.append(v)
        if return_scalar:
            outs.append(z)
        g.output(tuple(outs))
    return torch.fx.GraphModule(root, g), [xv]


def test_cpu_scalars_move_to_the_graph_device():
    gm, inputs = _graph()
    assert choose_backend(gm, inputs)[0] == "eager"  # two devices before
    assert move_cpu_scalars(gm, inputs) == 2
    backend, where = choose_backend(gm, inputs)
    assert backend == "triton" and where.type == "cuda"
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert "get_attr" not in {n.op for n in gm.graph.nodes}
    consts = [n for n in gm.graph.nodes if n.target is aten.scalar_tensor.default]
    assert sorted(n.args[0] for n in consts) == [0.5, 3.0], targets
    assert all(n.kwargs["device"].type == "cuda" for n in consts)
    assert {n.meta["val"].device.type for n in consts} == {"cuda"}
    assert next(n for n in consts if n.args[0] == 3.0).kwargs["dtype"] == torch.float32


def test_graphs_that_really_span_devices_are_left_alone():
    for kwargs in ({"extra_cpu_tensor": True}, {"return_scalar": True}):
        gm, inputs = _graph(**kwargs)
        before = str(gm.graph)
        assert move_cpu_scalars(gm, inputs) == 0
        assert str(gm.graph) == before


def test_cpu_graphs_are_untouched():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    for n in gm.graph.nodes:
        n.meta["val"] = torch.empty(3)
    assert move_cpu_scalars(gm, [torch.empty(3)]) == 0
