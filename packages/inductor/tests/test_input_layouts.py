"""The wrapper's input layout check: a graph input whose strides differ from the example's is
copied into the example's layout (the kernels were built for it), unless the caller promises
every call has the examples' sizes and strides (``gm.meta["input_layouts_fixed"]``, set by
aotautograd for its static programs), in which case the check is left out of the wrapper."""

from __future__ import annotations

import torch
import torch.fx as fx

from danlu_inductor import compile_fx

aten = torch.ops.aten


def _graph():
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    mm = g.call_function(aten.mm.default, (x, w))
    g.output((g.call_function(aten.add.Tensor, (g.call_function(aten.relu.default, (mm,)), 1.0)),))
    return fx.GraphModule(torch.nn.Module(), g)


def _body(compiled) -> str:
    return compiled.wrapper_source.split("def call", 1)[1]


def test_inputs_are_checked_unless_their_layouts_are_promised():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(8, 4, generator=gen).t()  # (4, 8), strides (1, 4)
    w = torch.randn(8, 3, generator=gen)
    checked = compile_fx(_graph(), [x, w])
    assert _body(checked).count("ensure_layout(") == 2
    # another layout than the example's: copied into the kernels' layout, values right
    x2 = torch.randn(4, 8, generator=gen)
    torch.testing.assert_close(checked(x2, w)[0], torch.relu(x2 @ w) + 1)

    promised = _graph()
    promised.meta["input_layouts_fixed"] = True
    fixed = compile_fx(promised, [x, w])
    assert "ensure_layout(" not in _body(fixed)
    for _ in range(2):
        x3 = torch.randn(8, 4, generator=gen).t()
        torch.testing.assert_close(fixed(x3, w)[0], torch.relu(x3 @ w) + 1)


def test_library_arguments_that_are_whole_buffers_are_passed_as_they_are():
    # mm(x, w) then mm(relu(..), w2): the inputs and the computed buffer are read with their
    # own sizes and strides, so no as_strided view is made for them; a transposed or
    # reshaped read still gets its view. Values against eager on fresh inputs.
    g = fx.Graph()
    x, w, w2 = g.placeholder("x"), g.placeholder("w"), g.placeholder("w2")

    def tt(n):  # a view of n with n's own sizes and strides (the backward's t(t(w)))
        return g.call_function(aten.t.default, (g.call_function(aten.t.default, (n,)),))

    h = g.call_function(aten.relu.default, (g.call_function(aten.mm.default, (tt(x), w)),))
    y = g.call_function(aten.mm.default, (tt(h), tt(w2)))
    t = g.call_function(aten.mm.default, (g.call_function(aten.t.default, (h,)), h))
    v = g.call_function(aten.view.default, (h, [2, 12]))
    g.output((y, t, g.call_function(aten.mm.default, (v, g.call_function(aten.t.default, (v,))))))
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    args = [torch.randn(4, 5, generator=gen), torch.randn(5, 6, generator=gen)]
    args.append(torch.randn(6, 3, generator=gen))
    compiled = compile_fx(fx.GraphModule(torch.nn.Module(), g), args)
    body = _body(compiled)
    calls = [ln for ln in body.splitlines() if "extern: aten.mm" in ln]
    assert len(calls) == 4, body
    for name in ("x", "w", "w2"):  # inputs as they are: passed, not viewed
        assert f"view({name}," not in body and f"as_strided({name}," not in body, body
    assert body.count("view(h") + body.count("view(buf") >= 2, body  # h transposed, h as [2, 12]
    for _ in range(2):
        fresh = [torch.randn(a.shape, generator=gen) for a in args]
        x_, w_, w2_ = (a.double() for a in fresh)
        h_ = torch.relu(x_ @ w_)
        v_ = h_.reshape(2, 12)
        for got, ref in zip(compiled(*fresh), (h_ @ w2_, h_.t() @ h_, v_ @ v_.t())):
            torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)
