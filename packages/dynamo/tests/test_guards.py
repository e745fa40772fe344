"""Guards (``capture/guard_codegen.py``) at the level of the check function: each change of
what a guard covers is caught, a value that cannot be read fails the check, and the failing
guard is named. End-to-end recompiles are in ``test_capture_guards.py``."""

import logging
import types

import pytest
import torch
from torch.overrides import TorchFunctionMode

from danlu_dynamo import eval_frame as ef
from danlu_dynamo.capture.guard_codegen import GuardSet
from danlu_dynamo.capture.source import FrameValues


def frame_check(add, f_globals=None, freevars=(), first_check=None, values=None):
    """The frame hook's check(L) for the guards ``add(gs)`` records."""
    gs = GuardSet()
    add(gs)
    return gs.compile_for_frame(
        f_globals if f_globals is not None else {}, freevars, first_check, values
    )


def tensor_check(x, dynamic=False):
    return frame_check(lambda gs: gs.tensor_match("L['x']", x, dynamic=dynamic))


def test_tensor_guard_accepts_an_equal_tensor_and_rejects_each_change():
    x = torch.randn(4, 6)
    check = tensor_check(x)
    assert check({"x": x}) and check({"x": torch.randn(4, 6)})
    changed = {
        "dtype": x.double(),
        "shape": torch.randn(4, 7),
        "stride": torch.randn(6, 4).t(),
        "requires_grad": x.clone().requires_grad_(),
        "device": torch.empty(4, 6, device="meta"),
        "type": torch.nn.Parameter(x.clone()),
    }
    for what, y in changed.items():
        assert not check({"x": y}), what
        reason = check.failure_reason({"x": y})
        assert reason.startswith("TENSOR_MATCH") and "L['x']" in reason, (what, reason)
    sparse = torch.randn(4, 6).to_sparse()  # same type, dtype and shape; strides (0, 0)
    assert not check({"x": sparse})
    assert check.failure_reason({"x": sparse}).startswith("TENSOR_MATCH")


def test_dynamic_tensor_guard_leaves_sizes_and_strides_to_the_shape_env():
    x = torch.randn(4, 6)
    check = tensor_check(x, dynamic=True)
    assert check({"x": torch.randn(5, 9)}) and check({"x": torch.randn(6, 4).t()})
    assert not check({"x": torch.randn(4, 6, 1)})  # the rank is still guarded
    assert not check({"x": x.double()})
    assert not check({"x": torch.empty(4, 6, device="meta")})


def test_tensor_guard_tells_negative_and_conjugate_views_apart():
    # their sign / conjugation is pending in a dispatch key, not in the storage
    x = torch.randn(3)
    assert torch._neg_view(x).is_neg()
    assert not tensor_check(x)({"x": torch._neg_view(x)})
    z = torch.randn(3, dtype=torch.cfloat)
    assert not tensor_check(z)({"x": z.conj()})


def test_a_value_that_cannot_be_read_fails_the_check_cleanly():
    check = tensor_check(torch.randn(2))
    assert not check({"x": [1.0, 2.0]})
    assert not check({})  # a missing local fails the check, it does not raise
    assert check.failure_reason({"x": 3}).startswith("TENSOR_MATCH")
    assert "cannot be read: KeyError" in check.failure_reason({})


def test_grad_mode_guard():
    check = frame_check(GuardSet.global_state)
    assert check({}) and check.failure_reason({}) is None
    with torch.no_grad():
        assert not check({})
        assert "is_grad_enabled" in check.failure_reason({})
        check_off = frame_check(GuardSet.global_state)
        assert check_off({})
    assert not check_off({})


def test_default_dtype_and_torch_function_mode_guards():
    check = frame_check(GuardSet.global_state)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert not check({})
        assert "get_default_dtype" in check.failure_reason({})
    finally:
        torch.set_default_dtype(old)
    with TorchFunctionMode():
        assert not check({})
        assert "torch_function_stack" in check.failure_reason({})
    assert check({})


def test_autocast_guard_is_one_call_when_autocast_is_off():
    check = frame_check(GuardSet.global_state)
    assert "_is_any_autocast_enabled() is False" in check.source
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not check({})
        assert "autocast" in check.failure_reason({})
    assert check({})


def test_autocast_guard_built_inside_autocast_sees_dtype_and_on_off_changes():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        check = frame_check(GuardSet.global_state)
        assert check({})
    assert not check({})  # autocast off again
    assert "is_autocast_enabled('cpu') is True" in check.failure_reason({})
    with torch.autocast("cpu", dtype=torch.float16):
        assert not check({})
        assert "get_autocast_dtype('cpu')" in check.failure_reason({})


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3, 4)


@pytest.mark.parametrize("module_dicts", [False, True], ids=["attributes", "module_dicts"])
def test_module_attribute_and_training_guards(module_dicts):
    net = Net()
    L = {"self": net, "x": torch.randn(2, 3)}

    def add(gs):
        gs.id_match("L['self']", net)
        gs.constant_match("L['self'].training", True)
        gs.tensor_match("L['self'].layer.weight", net.layer.weight)
        gs.tensor_match("L['x']", L["x"])

    values = FrameValues(L, {}) if module_dicts else None
    check = frame_check(add, values=values)
    # each source is read once; its children start from its value
    assert check.source.count("L['self']") == 1
    assert ("._modules['layer']" in check.source) == module_dicts
    assert check(L)
    net.eval()
    assert not check(L)
    assert "L['self'].training is True" in check.failure_reason(L)
    net.train()
    assert check(L)
    net.layer.weight = torch.nn.Parameter(torch.randn(4, 3).double())
    assert not check(L)
    assert "L['self'].layer.weight.dtype" in check.failure_reason(L)
    del net.layer
    assert not check(L)
    assert "cannot be read" in check.failure_reason(L)


def test_global_identity_length_dict_keys_and_exact_type_constants():
    G = {"scale": 2.0, "torch": torch, "flag": None}
    L = {"xs": [1, 2, 3], "cfg": {"a": 1, "b": 2}, "n": 3, "name": "relu", "t": (1, "a")}

    def add(gs):
        gs.constant_match("G['scale']", 2.0)
        gs.id_match("G['torch']", torch)
        gs.constant_match("G['flag']", None)
        gs.length("L['xs']", L["xs"])
        gs.dict_keys("L['cfg']", L["cfg"])
        for name in ("n", "name", "t"):
            gs.constant_match(f"L[{name!r}]", L[name])

    check = frame_check(add, G)
    assert check(L)
    assert check(dict(L, xs=[7, 8, 9], cfg={"a": 5, "b": 6}))
    cases = [
        (dict(L, xs=[1, 2]), "L['xs']"),
        (dict(L, xs=(1, 2, 3)), "L['xs']"),
        (dict(L, cfg={"b": 2, "a": 1}), "L['cfg']"),
        (dict(L, cfg={1.0: 1, "b": 2}), "L['cfg']"),
        (dict(L, n=4), "L['n']"),
        (dict(L, n=3.0), "L['n']"),  # equal value, other type
        (dict(L, n=True), "L['n']"),
        (dict(L, name="gelu"), "L['name']"),
        (dict(L, t=(True, "a")), "L['t']"),  # (True, "a") == (1, "a"): the items' types differ
    ]
    for bad, source in cases:
        assert not check(bad), bad
        assert source in check.failure_reason(bad), (bad, check.failure_reason(bad))
    G["scale"] = 3.0  # the check reads the frame's globals dict, not a copy
    assert not check(L) and "G['scale']" in check.failure_reason(L)
    G["scale"] = 2.0
    G["torch"] = object()
    assert not check(L) and "G['torch']" in check.failure_reason(L)
    G["torch"] = torch
    assert check(L) and check.failure_reason(L) is None


def test_nan_constant_guard():
    check = frame_check(lambda gs: gs.constant_match("L['v']", float("nan")))
    assert check({"v": float("nan")})
    assert not check({"v": 1.0}) and not check({"v": "nan"})


def test_aliasing_guards():
    a, c = torch.randn(2), torch.randn(2)
    L = {"a": a, "b": a, "c": c}

    def add(gs):
        gs.is_same("L['b']", "L['a']")
        gs.add("ALIAS", "L['a']", "L['a'] is not L['c']", ("L['c']",))

    check = frame_check(add)
    assert check(L)
    assert not check({"a": a, "b": a.clone(), "c": c})
    assert not check({"a": a, "b": a, "c": a})
    assert "L['a'] is not L['c']" in check.failure_reason({"a": a, "b": a, "c": a})


def test_hasattr_guards():
    class WithX:
        x = 1

    def add(gs):
        gs.hasattr_guard("L['a']", "x", True)
        gs.hasattr_guard("L['a']", "y", False)

    check = frame_check(add)
    assert check({"a": WithX()})
    assert not check({"a": object()})
    assert "hasattr(L['a'], 'x')" in check.failure_reason({"a": object()})
    with_y = WithX()
    with_y.y = 2
    assert not check({"a": with_y})
    assert "not hasattr(L['a'], 'y')" in check.failure_reason({"a": with_y})


def test_presence_test_of_an_attribute_that_is_read_anyway_is_left_out():
    class Config:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def add(gs):
        gs.hasattr_guard("L['a']", "x", True)
        gs.constant_match("L['a'].x", 1)
        gs.hasattr_guard("L['a']", "z", True)  # nothing reads L['a'].z: kept
        gs.hasattr_guard("L['a']", "y", False)

    check = frame_check(add)
    assert "hasattr(___v0, 'x')" not in check.source and "hasattr(___v0, 'z')" in check.source
    assert check({"a": Config(x=1, z=0)})
    # the read of the missing attribute fails the check as the presence test did
    assert not check({"a": Config(z=0)})
    assert not check({"a": Config(x=2, z=0)})
    assert not check({"a": Config(x=1)})
    assert not check({"a": Config(x=1, z=0, y=0)})


def test_printable_form_has_one_line_per_guard_and_keeps_a_repeated_guard_once():
    x = torch.randn(2, 3)
    gs = GuardSet()
    gs.tensor_match("L['x']", x)
    gs.constant_match("L['n']", 1)
    gs.tensor_match("L['x']", x)  # the same guards again (capture meets a value twice)
    gs.constant_match("L['n']", 1)
    check = gs.compile_for_frame({}, ())
    lines = check.guards.splitlines()
    assert check.guards == str(gs) and len(lines) == 2 == len(gs.guards)
    assert lines[0].startswith("TENSOR_MATCH") and "L['x'].shape == (2, 3)" in lines[0]
    assert lines[1].startswith("CONSTANT_MATCH") and "L['n'] ==" in lines[1]
    assert check.source.startswith("def ___check(L):")


def test_cells_are_read_as_locals_and_the_frames_own_cells_are_refused():
    # the C hook passes free variables' contents by name: C[i].cell_contents is L[freevars[i]]
    check = frame_check(lambda gs: gs.constant_match("C[0].cell_contents", 5), freevars=("k",))
    assert "L['k']" in check.source and "C[" not in check.source
    assert check({"k": 5}) and not check({"k": 6})
    with pytest.raises(ValueError, match="cell object"):
        frame_check(lambda gs: gs.id_match("K['y']", object()))


def test_the_first_check_runs_before_every_guard():
    active = [False]
    check = frame_check(lambda gs: gs.constant_match("L['n']", 1), first_check=lambda: active[0])
    assert not check({"n": 1})
    assert check.failure_reason({"n": 1}) == "another capture context (optimize call)"
    active[0] = True
    assert check({"n": 1}) and not check({"n": 2})


def test_segment_path_check_reads_locals_globals_closure_and_cells():
    gs = GuardSet()
    gs.constant_match("L['n']", 1)
    gs.constant_match("G['g']", 2)
    gs.constant_match("C[0].cell_contents", 3)
    gs.constant_match("K['k'].cell_contents", 4)
    check = gs.compile()
    G, C, K = {"g": 2}, (types.CellType(3),), {"k": types.CellType(4)}
    assert check({"n": 1}, G, C, K) and check.failure_reason({"n": 1}, G, C, K) is None
    K["k"].cell_contents = 5
    assert not check({"n": 1}, G, C, K)
    assert "K['k'].cell_contents" in check.failure_reason({"n": 1}, G, C, K)
    assert check.guards == str(gs) and check.source.startswith("def ___check(L, G, C, K):")


def scaled(x, w):
    return x * w


def scaled_alt(x, w):
    return ("compiled", x.shape)


def test_check_functions_drive_the_frame_hook_cache(caplog):
    """A shape change misses and recompiles; the recompile limit names the failing guard."""
    compiles = []

    def callback(frame, cache_size):
        if frame.f_code is not scaled.__code__:
            return None
        L = frame.f_locals
        compiles.append(tuple(L["x"].shape))
        gs = GuardSet()
        gs.global_state()
        gs.tensor_match("L['x']", L["x"])
        gs.constant_match("L['w']", L["w"])
        return ef.GuardedCode(scaled_alt.__code__, gs.compile_for_frame(frame.f_globals, ()))

    ef.reset()
    old = ef.set_cache_limit(2)
    try:
        region = ef.compiled_region(scaled, callback)
        with caplog.at_level(logging.WARNING, logger="danlu_dynamo"):
            assert region(torch.ones(2), 2) == ("compiled", (2,))
            assert region(torch.zeros(2), 2) == ("compiled", (2,))
            assert region(torch.ones(3), 2) == ("compiled", (3,))
            torch.testing.assert_close(region(torch.ones(4), 2), torch.full((4,), 2.0))
        assert compiles == [(2,), (3,)]
        (record,) = [r for r in caplog.records if r.name == "danlu_dynamo"]
        message = record.getMessage()
        assert "scaled" in message and "TENSOR_MATCH" in message
        assert "L['x'].shape == (3,)" in message
        reasons = ef.miss_reasons(scaled.__code__, {"x": torch.ones(3), "w": 3})
        assert sorted(r.split()[0] for r in reasons) == ["CONSTANT_MATCH", "TENSOR_MATCH"]
    finally:
        ef.set_cache_limit(old)
        ef.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_device_and_autocast_guards():
    x = torch.randn(4, 4, device="cuda")

    def add(gs):
        gs.global_state()
        gs.tensor_match("L['x']", x)

    check = frame_check(add)
    assert check({"x": torch.randn(4, 4, device="cuda")})
    assert not check({"x": x.cpu()})
    assert "L['x'].device ==" in check.failure_reason({"x": x.cpu()})
    with torch.autocast("cuda", dtype=torch.float16):
        assert not check({"x": x})
        assert "autocast" in check.failure_reason({"x": x})


def test_constant_tuples_pass_by_identity_or_by_items_and_their_types():
    """A constant tuple of immutable items passes at once when it is the object seen at
    capture (a module's ``stride``), and otherwise when its items and their types are equal,
    nested tuples too."""
    flat, nested = (1, 1), ((1, 2.0), "a")
    check = frame_check(
        lambda gs: (gs.constant_match("L['s']", flat), gs.constant_match("L['n']", nested))
    )
    assert check({"s": flat, "n": nested})
    assert check({"s": tuple([1, 1]), "n": ((1, 2.0), "a")})  # equal copies
    for bad in (
        {"s": (1, True), "n": nested},
        {"s": (1.0, 1), "n": nested},
        {"s": [1, 1], "n": nested},
        {"s": flat, "n": ((1, 2), "a")},  # 2 == 2.0 inside the nested tuple
        {"s": flat, "n": ((True, 2.0), "a")},
    ):
        assert not check(bad), bad


def test_sources_written_as_text_share_their_parents_in_the_check():
    """``type(X).forward``, ``getattr(P, '__closure__')[0].cell_contents``: sources built as
    text, not by ``Source.attr``, still read their parent once in the check, so a chain of
    module attribute reads (each an ``nn.Module.__getattr__`` call) runs once, not once per
    guard below it."""
    from danlu_dynamo.capture.source import Source

    def make(scale):
        def forward(x):
            return x * scale

        class M(torch.nn.Module):
            pass

        M.forward = staticmethod(forward)
        outer = torch.nn.Module()
        outer.sub = M()
        return outer

    m = make(2.0)
    fn_src = Source("type(L['m'].sub).forward")
    closure = Source(f"getattr({fn_src.expr}, '__closure__')[0].cell_contents")
    defaults = Source(f"getattr({fn_src.expr}, '__defaults__')")
    forward = type(m.sub).forward
    check = frame_check(
        lambda gs: (
            gs.id_match(fn_src.expr, forward),
            gs.constant_match(closure.expr, 2.0),
            gs.constant_match(defaults.expr, None),
        )
    )
    assert check({"m": m})
    assert not check({"m": make(2.0)})  # another class: another forward
    assert check.source.count("L['m']") == 1, check.source
    assert check.source.count(".sub") == 1, check.source
    assert closure.parent is not None and closure.parent.parent is not None
