"""ShapeEnv: symbols, arithmetic through torch.SymInt, simplification with value ranges,
guards (recorded only when the answer depends on the sizes), and checking guards on new
sizes."""

import pytest
import sympy
import torch

from danlu_primtorch.symbolic import FloorDiv, GuardCheckError, ShapeEnv, SymNode, sym_expr


def sizes(env, *values, prefix="x"):
    return [env.create_symbolic_size(v, f"{prefix}.size({i})") for i, v in enumerate(values)]


def test_create_symbol_and_specialised_sizes():
    env = ShapeEnv()
    a, b = sizes(env, 8, 6)
    assert isinstance(a, torch.SymInt) and isinstance(a.node, SymNode)
    s0 = sym_expr(a)
    assert s0.is_Symbol and s0.is_integer and s0.is_positive
    assert env.var_to_range[s0][0] == 2
    assert env.var_to_val[s0] == 8
    # 0 and 1 are specialised: plain ints, and an input check that they stay so
    assert env.create_symbolic_size(1, "y.size(0)") == 1
    assert env.create_symbolic_size(0, "y.size(1)") == 0
    assert env.evaluate_guards({"x.size(0)": 3, "x.size(1)": 9, "y.size(0)": 1, "y.size(1)": 0})
    assert not env.evaluate_guards({"x.size(0)": 3, "x.size(1)": 9, "y.size(0)": 2, "y.size(1)": 0})
    with pytest.raises(GuardCheckError):
        env.evaluate_guards({"x.size(0)": 3})


def test_arithmetic_builds_expressions_and_hints():
    env = ShapeEnv()
    a, b = sizes(env, 8, 6)
    s0, s1 = sym_expr(a), sym_expr(b)
    assert sym_expr(a * b + 2) == s0 * s1 + 2
    assert sym_expr(a * 4 // 4) == s0  # FloorDiv simplifies exact division
    assert sym_expr((a * b) // b) == s0
    assert sym_expr(a // 3) == FloorDiv(s0, 3)
    assert sym_expr(a % 4) == sympy.Mod(s0, 4)
    assert sym_expr(a - a) == 0 and (a - a) == 0
    assert sym_expr(torch.sym_max(a, b)) == sympy.Max(s0, s1)
    assert isinstance(a / 2, torch.SymFloat)
    # hints follow Python semantics
    for expr, value in ((a * b + 2, 50), (a // 3, 2), (-a // 3, -3), (a % 5, 3), (-a, -8)):
        assert env.hint_of(sym_expr(expr)) == value
    assert not env.guards  # building expressions records nothing


def test_branch_records_guard_that_fails_below_and_holds_above():
    env = ShapeEnv()
    (a,) = sizes(env, 20)
    assert bool(a > 16)  # the example takes the > 16 branch
    assert [g.format() for g in env.guards] == ["x.size(0) > 16"]
    assert not env.evaluate_guards({"x.size(0)": 12})
    assert env.evaluate_guards({"x.size(0)": 20})
    assert env.evaluate_guards({"x.size(0)": 17})
    assert not env.evaluate_guards({"x.size(0)": 16})
    assert env.failed_guards({"x.size(0)": 12})  # says which
    # the guard narrowed the range: the same question now needs no new guard
    assert bool(a > 10)
    assert len(env.guards) == 1
    assert env.var_to_range[sym_expr(a)][0] == 17


def test_other_branch_records_negated_guard():
    env = ShapeEnv()
    (a,) = sizes(env, 12)
    assert not bool(a > 16)
    assert str(env.guards[0]) == "x.size(0) <= 16"
    assert env.evaluate_guards({"x.size(0)": 12})
    assert not env.evaluate_guards({"x.size(0)": 20})


def test_value_ranges_decide_without_guards():
    env = ShapeEnv()
    a, b = sizes(env, 8, 6)
    assert bool(a > 1) and bool(a != 0) and bool(a * b >= a) and not bool(a < 0)
    assert bool(96 * b < 96 * a * b)  # factored: b * (a - 1) > 0
    assert bool(b < b * b)
    assert bool(a // 2 >= 1) and bool(a % 4 < 4)
    assert not env.guards


def test_int_specialises_and_replaces():
    env = ShapeEnv()
    a, b = sizes(env, 8, 6)
    assert int(b) == 6
    assert str(env.guards[0]) == "Eq(x.size(1), 6)"
    assert sym_expr(a * b) == 6 * sym_expr(a)  # b is now the constant 6
    assert env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 6})
    assert not env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 7})


def test_equality_guard_unifies_symbols():
    env = ShapeEnv(duck_shape=False)
    a, b = sizes(env, 8, 8)
    assert sym_expr(a) != sym_expr(b)
    assert bool(a == b)
    assert sym_expr(b - a) == 0  # b replaced by a
    assert env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 5})
    assert not env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 6})


def test_duck_sizing_shares_symbols_and_checks_it():
    env = ShapeEnv()  # duck_shape=True by default
    a, b = sizes(env, 8, 8)
    assert sym_expr(a) == sym_expr(b)
    assert "x.size(1) == x.size(0)" in env.format_guards()
    assert env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 5})
    assert not env.evaluate_guards({"x.size(0)": 5, "x.size(1)": 6})


def test_statically_known_true_records_nothing():
    env = ShapeEnv()
    (a,) = sizes(env, 8)
    assert a.node.statically_known_true() is False  # a non-bool node: not a known truth
    assert (a >= 2).node.statically_known_true()
    assert not (a > 16).node.statically_known_true()
    assert not env.guards


def test_bind_and_symbol_bindings():
    env = ShapeEnv()
    a, b = sizes(env, 8, 6)
    bool(a > b)
    binding = env.bind({"x.size(0)": 10, "x.size(1)": 3})
    assert binding == {sym_expr(a): 10, sym_expr(b): 3}
    assert env.evaluate_guards(binding)
    assert not env.evaluate_guards({sym_expr(a): 3, sym_expr(b): 10})


def test_format_guards_lists_ranges_checks_and_guards():
    env = ShapeEnv()
    a, b = sizes(env, 20, 6)
    env.add_input_check("x.stride(0)", sym_expr(b))
    bool(a > 16)
    text = env.format_guards()
    assert "17 <= x.size(0)" in text
    assert "x.stride(0) == x.size(1)" in text
    assert "x.size(0) > 16" in text


def test_guard_function_agrees_with_evaluate_guards():
    env = ShapeEnv()
    a, b = sizes(env, 20, 6)
    (c,) = sizes(env, 20, prefix="y")
    bool(a > 16)
    bool((a // 3) % 2 == 0)
    bool(a * b > 100)
    check = env.guard_function()
    assert set(check.sources) == {"x.size(0)", "x.size(1)", "y.size(0)"}
    for x0, x1, y0 in [(20, 6, 20), (12, 6, 12), (30, 6, 30), (20, 6, 21), (31, 7, 31), (1, 6, 1)]:
        values = {"x.size(0)": x0, "x.size(1)": x1, "y.size(0)": y0}
        assert check(values) == env.evaluate_guards(values), values
    assert check({"x.size(0)": 30, "x.size(1)": 6, "y.size(0)": 30})
    assert not check({"x.size(0)": 12, "x.size(1)": 6, "y.size(0)": 12})
    with pytest.raises(GuardCheckError):
        check({"x.size(0)": 30})
