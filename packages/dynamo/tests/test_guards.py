"""Guards on tensors, values and global state: each change of what a guard covers is caught."""

import logging

import pytest
import torch

from danlu_dynamo import eval_frame as ef
from danlu_dynamo.guards import GuardBuilder


def tensor_check(x):
    return GuardBuilder({"x": x}).tensor_match("L['x']").build()


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
        assert reason is not None and what.split()[0] in reason, (what, reason)


def test_tensor_guard_sees_dispatch_key_changes():
    z = torch.randn(3, dtype=torch.cfloat)
    check = tensor_check(z)
    conj = z.conj()  # same dtype/shape/stride, Conjugate dispatch key
    assert conj.is_conj()
    assert check({"x": z.clone()})
    assert not check({"x": conj})
    assert "dispatch keys" in check.failure_reason({"x": conj})
    sparse = torch.randn(3, 3).to_sparse()
    assert not tensor_check(torch.randn(3, 3))({"x": sparse})


def test_non_tensor_where_a_tensor_was_fails_cleanly():
    check = tensor_check(torch.randn(2))
    assert not check({"x": [1.0, 2.0]})
    assert not check({})  # a missing local fails the guard, it does not raise
    assert "not a tensor" in check.failure_reason({"x": 3})
    assert "KeyError" in check.failure_reason({})


def test_grad_mode_guard():
    check = GuardBuilder({}).grad_mode().build()
    assert check({})
    with torch.no_grad():
        assert not check({})
        assert "grad mode" in check.failure_reason({})
    with torch.no_grad():
        check_off = GuardBuilder({}).grad_mode().build()
        assert check_off({})
    assert not check_off({})


def test_autocast_and_deterministic_guards():
    check = GuardBuilder({}).global_state().build()
    assert check({})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not check({})
        assert "autocast" in check.failure_reason({})
    old = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert not check({})
        assert "deterministic" in check.failure_reason({})
    finally:
        torch.use_deterministic_algorithms(old)
    assert check({})


def test_autocast_guard_built_inside_autocast_sees_dtype_and_device_changes():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        check = GuardBuilder({}).autocast_state().build()
        assert check({})
    assert not check({})  # autocast off again
    with torch.autocast("cpu", dtype=torch.float16):
        assert not check({})
        assert "cpu=on/float16" in check.failure_reason({})
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        assert not check({})


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3, 4)


def test_module_attribute_and_training_guards():
    net = Net()
    L = {"self": net, "x": torch.randn(2, 3)}
    b = GuardBuilder(L)
    b.type_match("L['self']").module_training("L['self']")
    b.tensor_match("L['self'].layer.weight").tensor_match("L['x']")
    check = b.build()
    assert check(L)
    net.eval()
    assert not check(L)
    assert "training" in check.failure_reason(L)
    net.train()
    assert check(L)
    net.layer.weight = torch.nn.Parameter(torch.randn(4, 3).double())
    assert not check(L)
    assert check.failure_reason(L).startswith("L['self'].layer.weight")
    del net.layer
    assert not check(L)
    assert "AttributeError" in check.failure_reason(L)


def test_global_value_identity_len_and_dict_key_guards():
    G = {"scale": 2.0, "torch": torch, "flag": None}
    L = {"xs": [1, 2, 3], "cfg": {"a": 1, "b": 2}, "n": 3, "name": "relu"}
    b = GuardBuilder(L, G)
    b.constant_match("G['scale']").id_match("G['torch']").constant_match("G['flag']")
    b.len_match("L['xs']").dict_keys_match("L['cfg']").constant_match("L['n']")
    b.constant_match("L['name']")
    check = b.build()
    assert check(L)
    assert check(dict(L, xs=[7, 8, 9], cfg={"a": 5, "b": 6}))
    cases = [
        (dict(L, xs=[1, 2]), "L['xs']"),
        (dict(L, xs=(1, 2, 3)), "L['xs']"),
        (dict(L, cfg={"b": 2, "a": 1}), "L['cfg']"),
        (dict(L, n=4), "L['n']"),
        (dict(L, n=3.0), "L['n']"),  # equal value, other type
        (dict(L, n=True), "L['n']"),
        (dict(L, name="gelu"), "L['name']"),
    ]
    for bad, first in cases:
        assert not check(bad), bad
        assert check.failure_reason(bad).startswith(first)
    G["scale"] = 3.0
    assert not check(L)
    assert check.failure_reason(L).startswith("G['scale']")
    G["scale"] = 2.0
    G["torch"] = object()
    assert not check(L) and check.failure_reason(L).startswith("G['torch']")
    G["torch"] = torch
    assert check(L) and check.failure_reason(L) is None


def test_aliasing_guards():
    a, c = torch.randn(2), torch.randn(2)
    L = {"a": a, "b": a, "c": c}
    check = GuardBuilder(L).same_object("L['a']", "L['b']").distinct_objects("L['a']", "L['c']")
    check = check.build()
    assert check(L)
    assert not check({"a": a, "b": a.clone(), "c": c})
    assert not check({"a": a, "b": a, "c": a})
    assert "L['a'] is not L['c']" in check.failure_reason({"a": a, "b": a, "c": a})


def test_printable_form_has_one_line_per_guard_with_locations():
    x = torch.randn(2, 3)
    b = GuardBuilder({"x": x, "n": 1})
    b.tensor_match("L['x']", location="model.py:12").constant_match("L['n']").grad_mode()
    b.tensor_match("L[ 'x' ]")  # the same guard again, written differently: kept once
    check = b.build()
    lines = str(check.guards).splitlines()
    assert len(lines) == 3 == len(check.guards)
    assert lines[0].startswith("L['x']: Tensor dtype=float32 device=cpu shape=(2, 3)")
    assert lines[0].endswith("# model.py:12")
    assert lines[1] == "L['n'] == 1"
    assert lines[2] == "grad mode enabled is True"
    assert "def check_fn(L):" in check.source


@pytest.mark.parametrize(
    "source", ["x", "L", "L.x", "L['x'](1)", "L[x]", "H['x']", "L['x'] + 1", "G['a'].b[L]"]
)
def test_bad_sources_are_refused(source):
    with pytest.raises(ValueError, match="guard source"):
        GuardBuilder({"x": 1}).type_match(source, value=1)


def test_constant_guard_refuses_non_constants():
    with pytest.raises(TypeError, match="not a constant"):
        GuardBuilder({"x": [1]}).constant_match("L['x']")


def scaled(x, w):
    return x * w


def scaled_alt(x, w):
    return ("compiled", x.shape)


def test_guards_drive_the_frame_hook_cache(caplog):
    """A shape change misses and recompiles; the recompile limit names the failing guard."""
    compiles = []

    def callback(frame, cache_size):
        if frame.f_code is not scaled.__code__:
            return None
        compiles.append(tuple(frame.f_locals["x"].shape))
        b = GuardBuilder(frame.f_locals, frame.f_globals)
        b.tensor_match("L['x']", location="test_guards.py:scaled").constant_match("L['w']")
        b.grad_mode()
        return ef.GuardedCode(scaled_alt.__code__, b.build())

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
        assert "scaled" in message and "shape (4,) (expected (3,))" in message
        assert "test_guards.py:scaled" in message
    finally:
        ef.set_cache_limit(old)
        ef.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_device_and_autocast_guards():
    x = torch.randn(4, 4, device="cuda")
    check = GuardBuilder({"x": x}).tensor_match("L['x']").autocast_state().build()
    assert check({"x": torch.randn(4, 4, device="cuda")})
    assert not check({"x": x.cpu()})
    assert "device cpu (expected cuda:0)" in check.failure_reason({"x": x.cpu()})
    with torch.autocast("cuda", dtype=torch.float16):
        assert not check({"x": x})
        assert "autocast" in check.failure_reason({"x": x})
