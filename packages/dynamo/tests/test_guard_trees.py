"""Module trees in the check (``capture/guard_trees.py``): a module tree's guards (identities
under ``_modules``, constant attributes, hooks, parameters and buffers) as one
``_guard_checks.module_tree`` call. The tree only says "all hold"; where it says no, the
guards run one by one, so every answer below must be what the unbatched check answers."""

import pytest
import torch

from danlu_dynamo.capture import guard_codegen
from danlu_dynamo.capture.guard_codegen import GuardSet
from danlu_dynamo.capture.source import FrameValues

pytestmark = pytest.mark.skipif(
    guard_codegen._c_checks is None, reason="the C guard tests are not built"
)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(4)
        self.scale = 0.5


def _guards(block):
    """What capture records for ``block.conv`` and ``block.bn`` (one forward's worth)."""

    def add(gs):
        gs.id_match("L['self']", block)
        gs.no_module_hooks("L['self']", own_forward=False)
        gs.constant_match("L['self'].scale", block.scale)
        for name in ("conv", "bn"):
            src = f"L['self'].{name}"
            mod = getattr(block, name)
            gs.id_match(src, mod)
            gs.no_module_hooks(src, own_forward=False)
            gs.constant_match(f"{src}.training", mod.training)
        conv = "L['self'].conv"
        for attr in ("stride", "padding", "dilation", "groups", "padding_mode"):
            gs.constant_match(f"{conv}.{attr}", getattr(block.conv, attr))
        gs.tensor_match(f"{conv}.weight", block.conv.weight)
        gs.constant_match(f"{conv}.bias", None)
        bn = "L['self'].bn"
        gs.constant_match(f"{bn}.eps", block.bn.eps)
        gs.constant_match(f"{bn}.momentum", block.bn.momentum)
        for attr in ("weight", "bias", "running_mean", "running_var"):
            gs.tensor_match(f"{bn}.{attr}", getattr(block.bn, attr))

    return add


def _checks(block):
    """The batched check and the one-by-one check for ``block`` (``L`` with it as self)."""
    L = {"self": block}
    gs = GuardSet()
    _guards(block)(gs)
    quick = gs.compile_for_frame({}, (), None, FrameValues(L, {}))
    gs = GuardSet()
    _guards(block)(gs)
    plain = gs.compile_for_frame({}, (), None, None)
    return L, quick, plain


def test_a_module_trees_guards_are_one_call():
    L, quick, plain = _checks(Block())
    assert quick.source.count("___module_tree(") == 1
    for read in ("stride", "padding", "_parameters", "_buffers", "conv", "bn"):
        assert read not in quick.source
    assert quick(L) and plain(L)


def _same_answer(block, L, quick, plain, expected: bool):
    assert plain(L) is expected
    assert quick(L) is expected
    if not expected:
        why, plain_why = quick.failure_reason(L), plain.failure_reason(L)
        assert why is not None
        if not plain_why.startswith("a guarded value cannot be read"):
            assert why == plain_why  # the failing guard is named, not the batch


@pytest.mark.parametrize(
    "change, expected",
    [
        # equal values that are other objects: the batch says no, the guards say yes
        (lambda b: setattr(b.conv, "stride", tuple([1, 1])), True),
        (lambda b: setattr(b.bn, "eps", float("1e-05")), True),
        (lambda b: setattr(b, "scale", float("0.5")), True),
        # a parameter replaced by one with the same metadata: still the same program
        (lambda b: setattr(b.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 3, 3))), True),
        # changes the program depends on
        (lambda b: setattr(b.conv, "stride", (2, 2)), False),
        (lambda b: setattr(b.conv, "stride", (1.0, 1)), False),
        (lambda b: setattr(b.bn, "momentum", 0.2), False),
        (lambda b: b.bn.eval(), False),
        (lambda b: setattr(b, "scale", 1), False),
        (lambda b: b.conv.register_forward_hook(lambda *a: None), False),
        (lambda b: b.register_forward_pre_hook(lambda *a: None), False),
        (lambda b: setattr(b.bn, "forward", lambda x: x), False),
        (lambda b: setattr(b.conv, "bias", torch.nn.Parameter(torch.randn(4))), False),
        (lambda b: setattr(b.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 1, 1))), False),
        (lambda b: b.conv.weight.requires_grad_(False), False),
        (lambda b: setattr(b.bn, "running_mean", torch.zeros(4, dtype=torch.float64)), False),
        (lambda b: delattr(b.bn, "eps"), False),
        (lambda b: b.bn._buffers.pop("running_var"), False),
    ],
    ids=lambda x: "" if callable(x) else str(x),
)
def test_each_answer_is_the_unbatched_checks(change, expected):
    block = Block()
    L, quick, plain = _checks(block)
    change(block)
    _same_answer(block, L, quick, plain, expected)


def test_an_object_whose_class_changed_gets_the_unbatched_answer():
    block = Block()
    L, quick, plain = _checks(block)
    block.conv.__class__ = type("Conv", (torch.nn.Conv2d,), {})
    assert quick(L) is plain(L)


def test_a_submodule_replaced_by_another_object_fails_the_tree_and_the_check():
    block = Block()
    L, quick, plain = _checks(block)
    block.bn = torch.nn.BatchNorm2d(4)
    _same_answer(block, L, quick, plain, False)
    assert "L['self'].bn is" in quick.failure_reason(L)


def test_an_attribute_behind_a_data_descriptor_is_not_in_the_tree():
    class WithProperty(torch.nn.Module):
        @property
        def gain(self):
            return self.__dict__["gain"] * 2

    m = WithProperty()
    m.__dict__["gain"] = 3
    m.__dict__["bias_on"] = True
    L = {"self": m}

    def add(gs):
        gs.id_match("L['self']", m)
        gs.constant_match("L['self'].gain", m.gain)
        gs.constant_match("L['self'].bias_on", True)

    gs = GuardSet()
    add(gs)
    check = gs.compile_for_frame({}, (), None, FrameValues(L, {}))
    assert ".gain" in check.source  # read through the property
    assert check(L)
    m.__dict__["gain"] = 4
    assert not check(L)


def test_a_captured_model_recompiles_on_a_change_and_not_on_an_equal_value():
    import danlu_dynamo

    block = Block()
    calls = []

    def backend(gm, inputs):
        calls.append(1)
        return gm.forward

    def step(x):
        return block.bn(block.conv(x)) * block.scale

    fn = danlu_dynamo.optimize(backend)(step)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(fn(x), step(x))
    block.conv.stride = tuple([1, 1])  # equal: no recompile
    block.bn.eps = float("1e-05")
    torch.testing.assert_close(fn(x), step(x))
    assert len(calls) == 1
    block.conv.padding = (0, 0)
    torch.testing.assert_close(fn(x), step(x))
    assert len(calls) == 2


def _node(cls, keys=(), values=(), hooks=0, stores=(), children=(), absent=()):
    return (cls, keys, values, hooks, stores, children, absent, torch.nn.Module.__getattr__)


def test_module_tree_refuses_a_bad_spec_and_answers_false_for_a_missing_key():
    tree = guard_codegen._c_checks.module_tree
    conv = torch.nn.Conv2d(1, 1, 1)
    w = conv.weight
    spec = (type(w), w.dtype, True, tuple(w.shape), w.stride(), None, False, None)
    stores = (("_parameters", ("weight", "bias"), (spec, None)),)
    node = _node(torch.nn.Conv2d, ("stride",), (conv.stride,), 2, stores)
    assert not tree(conv, node)  # bias is a tensor
    conv.bias = None
    assert tree(conv, node)
    assert not tree(conv, _node(torch.nn.Conv2d, ("no_such",), (None,)))
    assert not tree(conv, _node(torch.nn.Conv2d, children=(("0", conv, node),)))  # no child
    assert tree(conv, _node(torch.nn.Conv2d, absent=("no_such",)))
    assert not tree(conv, _node(torch.nn.Conv2d, absent=("weight",)))
    seq = torch.nn.Sequential(conv)
    assert tree(seq, _node(torch.nn.Sequential, hooks=2, children=(("0", conv, node),)))
    assert not tree(seq, _node(torch.nn.Sequential, hooks=2, children=(("0", seq, node),)))
    assert not tree(seq, _node(torch.nn.Sequential, absent=("0",)))
    with pytest.raises(TypeError):
        tree(conv, node[:6])
    bad = (("_parameters", ("weight",), (spec[:3],)),)
    with pytest.raises(TypeError):
        tree(conv, _node(torch.nn.Conv2d, stores=bad))


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda m: None, True),
        (lambda m: setattr(m, "groups_kv", 2), False),  # an instance attribute
        (lambda m: m.register_buffer("groups_kv", torch.zeros(1)), False),
        (lambda m: m.register_parameter("groups_kv", torch.nn.Parameter(torch.zeros(1))), False),
        (lambda m: m.add_module("groups_kv", torch.nn.Identity()), False),
        (lambda m: setattr(type(m), "groups_kv", 1), False),  # a class attribute
    ],
    ids=["same", "instance", "buffer", "parameter", "module", "class"],
)
def test_an_attribute_a_module_must_not_have_is_in_the_tree(change, expected):
    cls = type("Attention", (torch.nn.Linear,), {})
    m = cls(2, 2)
    L = {"self": m}

    def add(gs):
        gs.id_match("L['self']", m)
        gs.hasattr_guard("L['self']", "groups_kv", False)

    gs = GuardSet()
    add(gs)
    quick = gs.compile_for_frame({}, (), None, FrameValues(L, {}))
    gs = GuardSet()
    add(gs)
    plain = gs.compile_for_frame({}, (), None, None)
    assert "hasattr" not in quick.source
    change(m)
    _same_answer(m, L, quick, plain, expected)


def test_a_module_with_its_own_getattr_keeps_its_presence_test():
    class Lazy(torch.nn.Module):
        def __getattr__(self, name):
            if name == "late":
                return 1
            return super().__getattr__(name)

    m = Lazy()
    L = {"self": m}
    gs = GuardSet()
    gs.id_match("L['self']", m)
    gs.hasattr_guard("L['self']", "other", False)
    check = gs.compile_for_frame({}, (), None, FrameValues(L, {}))
    assert "not hasattr(" in check.source and check(L)


@pytest.fixture(params=["fields", "getters"])
def tree_tensor_test(request):
    """Module trees with either tensor test: ``_tensor_checks``' field reads (where built)
    and the getter-based one that runs where it is not."""
    C, D = guard_codegen._c_checks, guard_codegen._direct_checks
    if request.param == "fields":
        if D is None:
            pytest.skip("_tensor_checks is not built for this torch")
        yield
        return
    C.use_tensor_test(None)
    try:
        yield
    finally:
        if D is not None:
            C.use_tensor_test(D.TENSOR_TEST)


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda b: None, True),
        (lambda b: setattr(b.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 3, 3))), True),
        (lambda b: b.conv.weight.requires_grad_(False), False),
        (lambda b: setattr(b.bn, "running_mean", torch.zeros(4, dtype=torch.float64)), False),
        (lambda b: setattr(b.bn, "running_var", torch.zeros(8)[::2]), False),
        (
            lambda b: setattr(b.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 3, 3).neg())),
            True,
        ),
    ],
    ids=["same", "equal", "requires_grad", "dtype", "strides", "other"],
)
def test_tensor_answers_with_either_tensor_test(tree_tensor_test, change, expected):
    block = Block()
    L, quick, plain = _checks(block)
    change(block)
    _same_answer(block, L, quick, plain, expected)
