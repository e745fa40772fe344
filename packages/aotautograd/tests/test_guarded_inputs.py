"""aot_graph(guarded_inputs=True): the call path for a capture that guards its inputs'
metadata. It must give the same values and gradients as eager, and send what captures do not
guard (the grad mode, storage offsets) down the full path."""

from __future__ import annotations

import torch
from helpers import matmul_step_beside_eager

import danlu_aotautograd as da


def _block(x, w, b):
    return torch.nn.functional.layer_norm(torch.relu(x @ w + b), (w.shape[1],)) * 2


def _compiled(fn, examples):
    gm = torch.fx.symbolic_trace(fn)
    return da.aot_graph(gm, examples, da.run_graph, guarded_inputs=True)


def test_guarded_calls_match_eager_values_and_grads():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    w = torch.randn(16, 12, generator=gen, requires_grad=True)
    b = torch.randn(12, generator=gen, requires_grad=True)
    # a transposed (non-contiguous) input: strides are part of the examples' metadata
    x = torch.randn(16, 24, generator=gen).t()
    compiled = _compiled(_block, [x, w, b])
    aot = compiled.aot_module.aot
    for _ in range(3):
        x = torch.randn(16, 24, generator=gen).t()
        out = compiled(x, w, b)
        ref = _block(x, w.detach().requires_grad_(), b.detach().requires_grad_())
        torch.testing.assert_close(out, ref)
        gw, gb = torch.autograd.grad(out.square().sum(), (w, b))
        w_r, b_r = w.detach().requires_grad_(), b.detach().requires_grad_()
        rw, rb = torch.autograd.grad(_block(x, w_r, b_r).square().sum(), (w_r, b_r))
        torch.testing.assert_close(gw, rw)
        torch.testing.assert_close(gb, rb)
    assert aot.stats["traces"] == 1


def test_other_grad_mode_takes_the_full_path():
    w, b = torch.randn(8, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    x = torch.randn(4, 8)
    compiled = _compiled(_block, [x, w, b])
    aot = compiled.aot_module.aot
    with torch.no_grad():
        out = compiled(x, w, b)
    assert not out.requires_grad
    torch.testing.assert_close(out, _block(x, w, b).detach())
    assert aot.stats["traces"] == 2  # joint first, then an inference trace


def _window(x):
    return x.as_strided((3, 4), (1, 3), 5) + 1


def test_other_storage_offset_takes_the_full_path():
    base = torch.randn(64)
    compiled = _compiled(_window, [base[:40]])
    aot = compiled.aot_module.aot
    for offset, traces in ((0, 1), (3, 2), (9, 3), (3, 3)):
        x = base[offset : offset + 40]
        torch.testing.assert_close(compiled(x), _window(x))
        assert aot.stats["traces"] == traces  # a new offset is a new signature


def _recording_compiler(seen: list):
    """A compiler that records what each graph promised (True: every input; a list: one flag
    per input) and checks every call's inputs against its placeholders' layouts where the
    graph says they are fixed. It reports its outputs' strides (from the trace, which eager
    matches) as a compiler may, so a backward can be promised its saved values' layouts."""

    def compiler(gm, examples):
        fixed = gm.meta.get("input_layouts_fixed")
        flags = list(fixed) if isinstance(fixed, list) else [bool(fixed)] * len(examples)
        layouts = [(tuple(x.shape), tuple(x.stride())) for x in examples]
        seen.append(fixed if isinstance(fixed, list) else bool(fixed))
        run = da.run_graph(gm, examples)
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]

        def call(args):
            got = [(tuple(a.shape), tuple(a.stride())) for a in args]
            for k, (flag, want, have) in enumerate(zip(flags, layouts, got)):
                assert not flag or want == have, f"input {k}: promised {want}, called with {have}"
            return run(args)

        call._boxed_call = True
        call.output_strides = [
            tuple(v.stride())
            if isinstance(v := getattr(n, "meta", {}).get("val"), torch.Tensor)
            else None
            for n in output.args[0]
        ]
        return call

    return compiler


def test_static_programs_promise_their_input_layouts_and_keep_the_promise():
    seen: list = []
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    w = torch.randn(16, 12, generator=gen, requires_grad=True)
    b = torch.randn(12, generator=gen, requires_grad=True)
    gm = torch.fx.symbolic_trace(_block)
    compiler = _recording_compiler(seen)
    # without guarded_inputs, every call takes the full path (a capture that guards strides
    # would send these to programs of their own the same way): transposed, expanded, a
    # slice with a stride of 3, an offset view
    compiled = da.aot_graph(gm, [torch.randn(24, 16), w, b], compiler, compiler)
    layouts = [
        lambda: torch.randn(24, 16, generator=gen),
        lambda: torch.randn(16, 24, generator=gen).t(),
        lambda: torch.randn(1, 16, generator=gen).expand(24, 16),
        lambda: torch.randn(24, 16, 3, generator=gen)[..., 1],
        lambda: torch.randn(25, 16, generator=gen)[1:],
    ]
    for make in layouts * 2:
        x = make()
        out = compiled(x, w, b)
        torch.testing.assert_close(out, _block(x, w, b))
        out.sum().backward()
    # forward graphs promise every input; backward graphs their saved values (the forward
    # reported their strides), not the incoming gradient (the last input)
    forwards = [s for s in seen if s is True]
    backwards = [s for s in seen if isinstance(s, list)]
    assert len(forwards) == len(backwards) > 1, seen
    assert all(any(b[:-1]) and not b[-1] for b in backwards), backwards


def test_dynamic_programs_promise_no_symbolic_input():
    seen: list = []
    gm = torch.fx.symbolic_trace(lambda x: (x * 2).sum(1))
    compiler = _recording_compiler(seen)
    compiled = da.aot_graph(gm, [torch.randn(4, 8)], compiler, dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x), (x * 2).sum(1))
    assert seen and all(isinstance(s, list) and not any(s) for s in seen), seen


def test_dynamic_programs_promise_their_static_inputs():
    """A module's parameters keep static sizes in a dynamic program, and the program's key
    holds them to their exact layouts: its forward promises them (the recording compiler
    checks every call), not the symbolic input nor the backward's gradients."""
    seen: list = []
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU(), torch.nn.Linear(6, 3))
    compiler = _recording_compiler(seen)
    compiled = da.aot_module(model, compiler, dynamic=True)
    for n in (4, 6, 9, 6):
        x = torch.randn(n, 8)
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
        out.sum().backward()
    forwards = [s for s in seen if isinstance(s, list) and len(s) == 5]
    assert forwards and all(s == [True] * 4 + [False] for s in forwards), seen


def _column_major(t):
    # a saved-tensor hook that hands the backward other strides (same values)
    return t.t().contiguous().t() if t.dim() == 2 else t


def test_saved_tensor_hooks_that_change_strides_keep_the_promise():
    seen: list = []
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    w = torch.randn(16, 12, generator=gen, requires_grad=True)
    b = torch.randn(12, generator=gen, requires_grad=True)
    compiler = _recording_compiler(seen)
    x = torch.randn(24, 16, generator=gen)
    compiled = da.aot_graph(torch.fx.symbolic_trace(_block), [x, w, b], compiler, compiler)
    for _ in range(2):
        x = torch.randn(24, 16, generator=gen, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(_column_major, _column_major):
            out = compiled(x, w, b)
        gx, gw = torch.autograd.grad(out.square().sum(), (x, w))
        x_r, w_r = x.detach().requires_grad_(), w.detach().requires_grad_()
        rx, rw = torch.autograd.grad(_block(x_r, w_r, b).square().sum(), (x_r, w_r))
        torch.testing.assert_close(gx, rx)
        torch.testing.assert_close(gw, rw)
    assert any(isinstance(s, list) and any(s) for s in seen), seen


def _scaled_by_running_buffer(x, buf):
    # the partitioner saves `view` (a strided slice of a buffer the program then writes: 4
    # values instead of the 24 of the sum), so the call clones it before the write, the way
    # a batch norm's backward could read a statistic the step also updates in place
    view = buf[:, ::2]
    out = (x * (view.expand_as(x) + x).sin()).sum(0)
    buf.add_(1.0)
    return out


def _reference_grad(x, buf_before):
    x_r = x.detach().requires_grad_()
    ref = (x_r * (buf_before[:, ::2].expand_as(x_r) + x_r).sin()).sum(0)
    (grad,) = torch.autograd.grad(ref.square().sum(), x_r)
    return grad


def test_saved_views_of_written_inputs_keep_their_promised_layout(monkeypatch):
    import danlu_aotautograd.runtime.compiled_function as cf

    clones: list = []
    keep = cf._clone_keeping_layout
    monkeypatch.setattr(cf, "_clone_keeping_layout", lambda t: clones.append(t.stride()) or keep(t))
    seen: list = []
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    compiler = _recording_compiler(seen)
    buf = torch.randn(3, 8, generator=gen)[1:2]
    x = torch.randn(6, 4, generator=gen, requires_grad=True)
    gm = torch.fx.symbolic_trace(_scaled_by_running_buffer)
    compiled = da.aot_graph(gm, [x, buf.clone()], compiler, compiler)
    for _ in range(3):
        x = torch.randn(6, 4, generator=gen, requires_grad=True)
        before = buf.clone()
        out = compiled(x, buf)
        torch.testing.assert_close(buf, before + 1)  # the write reached the caller's buffer
        (gx,) = torch.autograd.grad(out.square().sum(), x)
        # the old value, in the slice's strides: the recording compiler asserts the backward
        # was called with the layout it was promised
        torch.testing.assert_close(gx, _reference_grad(x, before))
    assert clones == [(8, 2)] * 3
    backwards = [s for s in seen if isinstance(s, list)]
    assert backwards and all(any(b[:-1]) for b in backwards), seen


def test_clone_keeping_layout_copies_strided_and_overlapping_views():
    from danlu_aotautograd.runtime.compiled_function import _clone_keeping_layout

    base = torch.randn(5, 9)
    for view in (base[1:, ::2], base.t()[2:], base[:, :1].expand(5, 4), base[2:4, 3:7]):
        copy = _clone_keeping_layout(view)
        assert copy.stride() == view.stride() and copy.shape == view.shape
        assert copy.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
        torch.testing.assert_close(copy, view)


def _count_compile_for(compiled) -> list:
    aot = compiled.aot_module.aot
    calls = []
    inner = aot.compile_for

    def counting(*a, **k):
        calls.append(1)
        return inner(*a, **k)

    aot.compile_for = counting
    return calls


def test_a_symbolic_capture_binds_each_size_once_then_calls_directly():
    """With guarded inputs a symbolic program's repeated sizes skip the per-input signature:
    only its symbolic inputs' sizes and strides, the grad mode and the offsets are read."""
    from danlu_primtorch import trace

    def f(x, w):
        return (x.reshape(x.shape[0] * x.shape[1], -1) @ w).relu()

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    w = torch.randn(6, 4, generator=gen)
    gm = trace(f, torch.randn(3, 5, 6), w, dynamic=[True, False])
    examples = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    compiled = da.aot_graph(gm, examples, da.run_graph, guarded_inputs=True)
    calls = _count_compile_for(compiled)
    shapes = [(3, 5, 6), (2, 7, 6), (3, 5, 6), (2, 7, 6), (4, 4, 6)]
    for shape in shapes:
        matmul_step_beside_eager(compiled, f, torch.randn(shape, generator=gen), w)
    # each new size: the full way and one lookup of its bound program; repeats: neither
    assert len(calls) == 2 * 3, calls
    assert compiled.aot_module.aot.stats["traces"] == 1
    # a non-contiguous symbolic input binds its own strides: the full way again, right values
    x = torch.randn(2, 7, 12, generator=gen)[..., ::2]
    torch.testing.assert_close(compiled(x, w.clone()), f(x, w))
    assert len(calls) == 2 * 4
    # a static input at another storage offset: the full way (it checks what captures do not)
    w_off = torch.randn(25, generator=gen)[1:].view(6, 4)
    x = torch.randn(3, 5, 6, generator=gen)
    torch.testing.assert_close(compiled(x, w_off), f(x, w_off))
    assert len(calls) > 2 * 4


def test_a_symbolic_int_input_binds_each_value_once():
    from test_symbolic_int_inputs import _captured, _f

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.randn(6, 20, generator=gen)
    w = torch.randn(20, 4, generator=gen)
    compiled = da.aot_graph(_captured(), [x, w, 5], da.run_graph, guarded_inputs=True)
    calls = _count_compile_for(compiled)
    for n in (5, 2, 5, 11, 2, 5):
        torch.testing.assert_close(compiled(x, w, n), _f(x, w, n))
    assert len(calls) == 2 * 3, calls
    assert compiled.aot_module.aot.stats["traces"] == 1
