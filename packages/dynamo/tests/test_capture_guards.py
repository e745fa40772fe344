"""Guards: what the trace assumed is checked; a change recompiles; the limit falls back."""

import logging

import torch

import danlu_dynamo
from danlu_dynamo import config


def _count_graphs():
    graphs = []

    def backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def test_same_inputs_hit_cache():
    graphs, be = _count_graphs()
    opt = danlu_dynamo.optimize(be)(lambda x: x * 2)
    for _ in range(3):
        opt(torch.randn(3))
    assert len(graphs) == 1


def test_shape_change_recompiles(caplog):
    graphs, be = _count_graphs()

    def f(x):
        return x.reshape(-1) * x.shape[0]

    opt = danlu_dynamo.optimize(be)(f)
    with caplog.at_level(logging.INFO, logger="danlu_dynamo.recompiles"):
        for n in (2, 3, 2):
            x = torch.randn(n, 4)
            assert torch.equal(opt(x), f(x))
    assert len(graphs) == 2
    assert any("recompiling" in r.getMessage() for r in caplog.records)


def test_dtype_and_stride_changes_recompile():
    graphs, be = _count_graphs()
    opt = danlu_dynamo.optimize(be)(lambda x: x + 1)
    x = torch.randn(3, 4)
    opt(x)
    opt(x.double())
    opt(x.t())
    opt(x.requires_grad_())
    assert len(graphs) == 4


def test_python_constant_guard():
    graphs, be = _count_graphs()

    def f(x, k):
        return x * k

    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(2)
    assert torch.equal(opt(x, 2), x * 2)
    assert torch.equal(opt(x, 3), x * 3)
    assert torch.equal(opt(x, 2.0), x * 2.0)
    assert len(graphs) == 3


def test_module_training_flag_guarded():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    opt = danlu_dynamo.optimize("eager")(m)
    x = torch.randn(2, 4)
    m.eval()
    assert torch.equal(opt(x), m(x))
    m.train()
    torch.manual_seed(0)
    a = opt(x)
    torch.manual_seed(0)
    assert torch.equal(a, m(x))


def test_global_change_is_seen():
    g = {"K": 2}
    exec("def f(x):\n    return x * K\n", g)
    f = g["f"]
    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(3)
    assert torch.equal(opt(x), x * 2)
    g["K"] = 5
    assert torch.equal(opt(x), x * 5)


def test_attribute_change_is_seen():
    class Cfg:
        scale = 1.0

    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        return x * cfg.scale

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(3)
    assert torch.equal(opt(x), x * 2)
    cfg.scale = 3.0
    assert torch.equal(opt(x), x * 3)


def test_grad_mode_is_guarded():
    opt = danlu_dynamo.optimize("eager")(lambda x: x * 2)
    x = torch.randn(3, requires_grad=True)
    assert opt(x).requires_grad
    with torch.no_grad():
        assert not opt(x).requires_grad


def test_recompile_limit_falls_back_to_eager(caplog):
    graphs, be = _count_graphs()
    opt = danlu_dynamo.optimize(be)(lambda x, k: x + k)
    x = torch.randn(2)
    with caplog.at_level(logging.WARNING, logger="danlu_dynamo.recompiles"):
        for k in range(config.recompile_limit + 4):  # floats are guarded by value: one entry each
            assert torch.equal(opt(x, k + 0.5), x + (k + 0.5))
    assert len(graphs) == config.recompile_limit
    assert any("recompile limit" in r.getMessage() for r in caplog.records)


def test_guards_are_listed_in_explain():
    def f(x, n):
        return x * n

    e = danlu_dynamo.explain(f)(torch.randn(2, 3), 4)
    text = "\n".join(e.guards)
    assert "TENSOR_MATCH" in text and "L['x']" in text
    assert "CONSTANT_MATCH" in text and "L['n']" in text
    assert "GLOBAL_STATE" in text


def test_reset_drops_caches():
    graphs, be = _count_graphs()
    opt = danlu_dynamo.optimize(be)(lambda x: x - 1)
    opt(torch.randn(2))
    danlu_dynamo.reset()
    opt(torch.randn(2))
    assert len(graphs) == 2


def test_side_effect_replay_on_global_object():
    class Box:
        pass

    box = Box()
    box.log = []

    def f(x):
        box.log.append(1)
        box.last = 7
        return x + len(box.log)

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.zeros(1)
    assert torch.equal(opt(x), torch.ones(1))
    assert box.log == [1] and box.last == 7
    assert torch.equal(opt(x), torch.full((1,), 2.0))
    assert box.log == [1, 1]


def test_storage_offset_read_by_the_program_is_guarded():
    # as_strided counts from the storage's start: the offset the trace read must be checked
    def f(x):
        return x.as_strided((2, 3), (3, 1), x.storage_offset() + 2) * 2

    opt = danlu_dynamo.optimize("eager")(f)
    base = torch.randn(64)
    for start in (0, 5, 9, 5):
        x = base[start : start + 40]
        torch.testing.assert_close(opt(x), f(x))


def test_storage_offset_of_a_view_made_in_the_graph_is_guarded():
    def f(x):
        y = x[1:]
        return y.as_strided((3,), (2,), y.storage_offset()) + 1

    opt = danlu_dynamo.optimize("eager")(f)
    base = torch.randn(64)
    for start in (0, 4, 11):
        x = base[start : start + 20]
        torch.testing.assert_close(opt(x), f(x))


def test_autocast_dtype_is_guarded():
    # a backend records the casts autocast made while tracing: another autocast dtype (or
    # autocast off) needs its own graph
    def f(x, w):
        return x @ w

    graphs, be = _count_graphs()
    opt = danlu_dynamo.optimize(be)(f)
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            assert opt(x, w).dtype == f(x, w).dtype == dtype
    assert len(graphs) == 2
    assert opt(x, w).dtype == torch.float32
    assert len(graphs) == 3


def test_torch_function_read_from_an_argument_attribute_or_global_is_guarded():
    def f(x, fn):
        return fn(x) + 1

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(5)
    for fn in (torch.sin, torch.cos, torch.relu, lambda t: t * 5):
        torch.testing.assert_close(opt(x, fn), f(x, fn))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = torch.relu

        def forward(self, x):
            return self.act(x)

    m = M()
    opt_m = danlu_dynamo.optimize("eager")(m)
    torch.testing.assert_close(opt_m(x), torch.relu(x))
    m.act = torch.tanh
    torch.testing.assert_close(opt_m(x), torch.tanh(x))


def test_isinstance_of_a_parameter_input():
    def f(p):
        return p * 2 if isinstance(p, torch.nn.Parameter) else p * 3

    opt = danlu_dynamo.optimize("eager")(f)
    p = torch.nn.Parameter(torch.ones(2))
    torch.testing.assert_close(opt(p), p * 2)
    t = torch.ones(2)
    torch.testing.assert_close(opt(t), t * 3)


def test_hooks_registered_after_compiling_are_run():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) + 1

    m = M()
    opt = danlu_dynamo.optimize("eager")(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(opt(x), m(x))
    handle = m.lin.register_forward_hook(lambda mod, inp, out: out * 0)
    torch.testing.assert_close(opt(x), torch.ones(3, 4))  # the hook zeroes lin's output
    handle.remove()
    torch.testing.assert_close(opt(x), m(x))
    from torch.nn.modules.module import register_module_forward_pre_hook

    handle = register_module_forward_pre_hook(lambda mod, inp: (inp[0] * 0,))
    try:
        torch.testing.assert_close(opt(x), m(x))  # eager with the global hook
        torch.testing.assert_close(opt(x), (m.lin.bias + 1).expand(3, 4))
    finally:
        handle.remove()


def test_tuple_items_and_dict_keys_are_guarded_with_their_types():
    # 1 == 1.0 == True, but programs see the type
    def f(x, cfg, d):
        return x * cfg[0], torch.full((2,), cfg[0]), [f"{k}" for k in d]

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.ones(2, dtype=torch.int64)
    for v in (1, 1.0, True):
        got, want = opt(x, (v,), {v: 0}), f(x, (v,), {v: 0})
        assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
        assert got[2] == want[2]


def test_is_leaf_and_is_inference_of_inputs_are_read_from_the_real_tensor():
    def f(x):
        if x.is_inference():
            x = x.clone()
        return x * 2 if x.is_leaf else x * 3

    opt = danlu_dynamo.optimize("eager")(f)
    leaf = torch.ones(3, requires_grad=True)
    torch.testing.assert_close(opt(leaf), f(leaf))
    non_leaf = torch.ones(3, requires_grad=True) * 1
    torch.testing.assert_close(opt(non_leaf), f(non_leaf))
    with torch.inference_mode():
        inference = torch.ones(3)
    torch.testing.assert_close(opt(inference), f(inference))


def test_attribute_set_by_the_user_on_an_input_tensor():
    def f(t):
        return t * 2, getattr(t, "foo", 0) + 1, hasattr(t, "foo")

    opt = danlu_dynamo.optimize("eager")(f)
    t = torch.randn(2)
    assert opt(t)[1:] == f(t)[1:] == (1, False)
    t.foo = 10
    assert opt(t)[1:] == f(t)[1:] == (11, True)
