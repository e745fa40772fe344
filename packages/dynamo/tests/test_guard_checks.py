"""The C guard tests (``danlu_dynamo._guard_checks``, and ``_tensor_checks`` that reads a
tensor's fields) answer what the Python expressions they replace answer, for the tensors and
modules a guard meets."""

import os

import pytest
import torch

from danlu_dynamo.capture import guard_codegen, module_hooks

C = guard_codegen._c_checks
D = guard_codegen._direct_checks
pytestmark = pytest.mark.skipif(C is None, reason="the C guard tests are not built")
_TESTS = [pytest.param(lambda: C.tensor_match, id="getters")] + [
    pytest.param(
        lambda: D.tensor_match,
        id="fields",
        marks=pytest.mark.skipif(D is None, reason="_tensor_checks is not built for this torch"),
    )
]


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


@pytest.mark.parametrize("impl", _TESTS)
def test_tensor_match_agrees_with_the_expression(impl):
    match = impl()
    variants = _variants()
    for name, t in variants.items():
        spec = _spec(t)
        assert match(t, *spec) is True, name
        assert _expression(t, *spec) is True, name
        for other_name, other in variants.items():
            want = _expression(other, *spec)
            assert match(other, *spec) is want, (name, other_name)


@pytest.mark.parametrize("impl", _TESTS)
@pytest.mark.parametrize("field", range(1, 8))
def test_tensor_match_each_field_fails_alone(impl, field):
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
    assert impl()(t, *spec) is False
    assert _expression(t, *spec) is False


@pytest.mark.parametrize("impl", _TESTS)
def test_tensor_match_of_a_non_tensor_is_false_or_raises(impl):
    spec = _spec(torch.randn(2))
    assert impl()(3, *spec) is False  # the type test comes first
    with pytest.raises(TypeError):
        impl()(torch.randn(2))


def _in_place_changes():
    """Changes to a tensor's metadata that keep the object (a guard must see each)."""

    def data(p):
        p.data = torch.randn(5, 3)

    def set_(p):
        with torch.no_grad():
            p.set_(torch.randn(6))

    def resize(p):  # only the sizes differ afterwards
        p.requires_grad_(False).resize_(2, 2)
        p.requires_grad_(True)

    def restride(p):
        with torch.no_grad():
            p.as_strided_((3, 5), (1, 3))

    def transpose(p):
        with torch.no_grad():
            p.t_()

    def freeze(p):
        p.requires_grad_(False)

    def to_double(p):
        p.data = p.data.double()

    return [data, set_, resize, restride, transpose, freeze, to_double]


@pytest.mark.parametrize("impl", _TESTS)
@pytest.mark.parametrize("change", _in_place_changes(), ids=lambda f: f.__name__)
def test_a_parameter_changed_in_place_fails(impl, change):
    p = torch.nn.Parameter(torch.randn(3, 5))
    spec = _spec(p)
    assert impl()(p, *spec) is True
    change(p)
    assert _expression(p, *spec) is False
    assert impl()(p, *spec) is False


class _Rewrap(torch.Tensor):
    """A tensor subclass with ``__torch_dispatch__`` (the Python dispatch key)."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), dtype=inner.dtype, device=inner.device
        )

    def __init__(self, inner):
        self.inner = inner

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda a: a.inner if isinstance(a, _Rewrap) else a  # noqa: E731
        return func(*[unwrap(a) for a in args], **(kwargs or {}))


class _ShapeMode(torch.overrides.TorchFunctionMode):
    """A mode that answers ``.shape`` itself: the getters see it, a field read would not."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.shape.__get__:
            return torch.Size([7])
        return func(*args, **(kwargs or {}))


@pytest.mark.skipif(D is None, reason="_tensor_checks is not built for this torch")
def test_field_reads_defer_to_the_getters_where_they_would_differ():
    r = _Rewrap(torch.randn(2, 3))
    spec = _spec(r)
    assert D.tensor_match(r, *spec) is C.tensor_match(r, *spec) is True
    t = torch.randn(2, 3)
    spec = _spec(t)
    seven = (*spec[:3], (7,), *spec[4:])
    with _ShapeMode():
        want = C.tensor_match(t, *seven)
        assert D.tensor_match(t, *seven) is want
        assert D.tensor_match(t, *spec) is C.tensor_match(t, *spec)


def _answer(match, t, spec):
    try:
        return match(t, *spec)
    except Exception as e:  # the getters' own error for a tensor they cannot describe
        return type(e)


@pytest.mark.skipif(D is None, reason="_tensor_checks is not built for this torch")
def test_tensors_it_does_not_read_get_the_getters_answer():
    sparse = torch.randn(3, 3).to_sparse()
    nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    with torch.inference_mode():
        inference = torch.randn(2, 3)
    for t in (sparse, nested, inference):
        spec = (type(t), t.dtype, False, (2, 3), (3, 1), None, False, None)
        assert _answer(D.tensor_match, t, spec) == _answer(C.tensor_match, t, spec)
    spec = _spec(inference)
    assert D.tensor_match(inference, *spec) is C.tensor_match(inference, *spec) is True


@pytest.mark.skipif(D is None, reason="_tensor_checks is not built for this torch")
def test_which_types_read_fields():
    class Plain(torch.Tensor):
        pass

    class Own(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs)

    assert guard_codegen._direct_tensor_test(torch.Tensor)
    assert guard_codegen._direct_tensor_test(torch.nn.Parameter)
    assert guard_codegen._direct_tensor_test(Plain)
    assert not guard_codegen._direct_tensor_test(Own)
    gs = guard_codegen.GuardSet()
    gs.tensor_match("L['x']", torch.randn(2))
    gs.tensor_match("L['y']", torch.randn(2).as_subclass(Own))
    assert "___tensor_read(L['x']" in gs.guards[0].expr
    assert "___tensor_ok(L['y']" in gs.guards[1].expr
    assert D.TORCH_VERSION == torch.__version__


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
    assert "___tensor_ok" in g.expr or "___tensor_read" in g.expr
    assert "L['x'].shape == (2, 3)" in str(g) and "L['x'].stride() == (3, 1)" in str(g)
    check = gs.compile_for_frame({}, ())
    assert check({"x": torch.randn(2, 3)})
    assert not check({"x": torch.randn(3, 2)})
    assert not check({"x": torch.randn(3, 2).t()})
    reason = check.failure_reason({"x": torch.randn(2, 3, dtype=torch.float64)})
    assert reason.startswith("TENSOR_MATCH") and "L['x'].dtype" in reason
    gs.tensor_match("L['x']", x)  # the same guard again: kept once
    assert len(gs.guards) == 1


def test_tensor_checks_are_built_where_expected():
    """Where the build had torch (the noxfile's installs say so), the C++ test must be there:
    its tests would otherwise skip unseen."""
    if os.environ.get("DANLU_EXPECT_TENSOR_CHECKS") != "1":
        pytest.skip("DANLU_EXPECT_TENSOR_CHECKS is not set")
    assert D is not None


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
