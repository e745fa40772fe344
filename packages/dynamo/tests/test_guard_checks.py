"""The C guard tests (``danlu_dynamo._guard_checks``) answer what the Python expressions they
replace answer, for the tensors and modules a guard meets."""

import pytest
import torch

from danlu_dynamo.capture import guard_codegen, module_hooks

C = guard_codegen._c_checks
pytestmark = pytest.mark.skipif(C is None, reason="the C guard tests are not built")


def _expression(t, cls, dtype, rg, shape, stride, device, neg, conj) -> bool:
    """The Python expression the C test replaces (``GuardSet.tensor_match``'s)."""
    return (
        type(t) is cls
        and t.dtype is dtype
        and t.requires_grad is rg
        and t.shape == shape
        and t.stride() == stride
        and (t.is_cpu if device is None else t.device == device)
        and t.is_neg() is neg
        and (conj is None or t.is_conj() is conj)
    )


def _spec(t):
    return (
        type(t),
        t.dtype,
        t.requires_grad,
        tuple(t.shape),
        tuple(t.stride()),
        None if t.device.type == "cpu" else t.device,
        t.is_neg(),
        t.is_conj() if t.dtype.is_complex else None,
    )


def _variants():
    base = torch.randn(4, 6)
    p = torch.nn.Parameter(torch.randn(3, 5))
    z = torch.randn(3, 2, dtype=torch.complex64)
    return {
        "plain": base,
        "parameter": p,
        "transposed": base.t(),
        "sliced": base[:, ::2],
        "expanded": torch.randn(4, 1).expand(4, 3),
        "int": torch.arange(6),
        "requires grad": torch.randn(2, requires_grad=True),
        "scalar": torch.tensor(2.0),
        "empty": torch.empty(0, 3),
        "neg view": torch._neg_view(base),
        "complex": z,
        "conj": z.conj(),
        "meta": torch.empty(2, 3, device="meta"),
    }


def test_tensor_match_agrees_with_the_expression():
    variants = _variants()
    for name, t in variants.items():
        spec = _spec(t)
        assert C.tensor_match(t, *spec) is True, name
        assert _expression(t, *spec) is True, name
        for other_name, other in variants.items():
            want = _expression(other, *spec)
            assert C.tensor_match(other, *spec) is want, (name, other_name)


@pytest.mark.parametrize("field", range(1, 8))
def test_tensor_match_each_field_fails_alone(field):
    t = torch.randn(3, 4)
    spec = list(_spec(t))
    wrong = {
        1: torch.nn.Parameter,
        2: torch.float64,
        3: True,
        4: (3, 5),
        5: (1, 3),
        6: torch.device("meta"),
        7: True,
    }[field]
    spec[field - 1] = wrong
    assert C.tensor_match(t, *spec) is False
    assert _expression(t, *spec) is False


def test_tensor_match_of_a_non_tensor_is_false_or_raises():
    spec = _spec(torch.randn(2))
    assert C.tensor_match(3, *spec) is False  # the type test comes first
    with pytest.raises(TypeError):
        C.tensor_match(torch.randn(2))


def test_subclass_with_its_own_attribute_keeps_the_expression():
    class Shaped(torch.Tensor):
        @property
        def shape(self):
            return torch.Size([1])

    assert guard_codegen._c_tensor_test(torch.Tensor)
    assert guard_codegen._c_tensor_test(torch.nn.Parameter)
    assert not guard_codegen._c_tensor_test(Shaped)
    gs = guard_codegen.GuardSet()
    gs.tensor_match("L['x']", torch.randn(2, 2).as_subclass(Shaped))
    assert "___tensor_ok" not in gs.guards[0].expr and ".shape ==" in gs.guards[0].expr


def test_guard_prints_the_expression_and_fails_with_it():
    gs = guard_codegen.GuardSet()
    x = torch.randn(2, 3)
    gs.tensor_match("L['x']", x)
    g = gs.guards[0]
    assert "___tensor_ok" in g.expr
    assert "L['x'].shape == (2, 3)" in str(g) and "L['x'].stride() == (3, 1)" in str(g)
    check = gs.compile_for_frame({}, ())
    assert check({"x": torch.randn(2, 3)})
    assert not check({"x": torch.randn(3, 2)})
    assert not check({"x": torch.randn(3, 2).t()})
    reason = check.failure_reason({"x": torch.randn(2, 3, dtype=torch.float64)})
    assert reason.startswith("TENSOR_MATCH") and "L['x'].dtype" in reason
    gs.tensor_match("L['x']", x)  # the same guard again: kept once
    assert len(gs.guards) == 1


def test_hook_tests_agree_with_the_python_ones():
    m = torch.nn.Linear(2, 2)
    seen = []

    def agree():
        d = m.__dict__
        assert C.hookless(d) is module_hooks.hookless(d)
        assert C.plain(d) is module_hooks.plain(d)
        seen.append((C.hookless(d), C.plain(d)))

    agree()
    h = m.register_forward_hook(lambda *a: None)
    agree()
    h.remove()
    h = m.register_forward_pre_hook(lambda *a: None)
    agree()
    h.remove()
    m.register_full_backward_hook(lambda *a: None)
    agree()
    m._backward_hooks.clear()
    m.forward = lambda x: x
    agree()
    assert seen == [(True, True), (False, False), (False, False), (False, False), (True, False)]
    with pytest.raises(KeyError):
        C.hookless({})
    with pytest.raises(TypeError):
        C.plain(m)
