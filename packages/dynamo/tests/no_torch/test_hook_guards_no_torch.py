"""Guards on plain Python values need no torch, and drive the frame hook's cache."""

import subprocess
import sys

from hook_support import clean_state

from danlu_dynamo import eval_frame as ef
from danlu_dynamo.guards import GuardBuilder


def test_guards_module_imports_without_torch():
    code = "import sys, danlu_dynamo.guards, danlu_dynamo.eval_frame; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def poly(x, coeffs, *, opts):
    return sum(c * x**i for i, c in enumerate(coeffs)) + opts["bias"]


def poly_alt(x, coeffs, *, opts):
    _same_cells_as_poly = lambda: x  # noqa: E731, F841 (poly's genexpr makes x a cell)
    return ("compiled", len(coeffs))


def test_value_guards_select_cache_entries():
    clean_state()
    compiled = []

    def callback(frame, cache_size):
        if frame.f_code is not poly.__code__:
            return None
        b = GuardBuilder(frame.f_locals, frame.f_globals)
        b.type_match("L['x']").len_match("L['coeffs']").dict_keys_match("L['opts']")
        b.constant_match("L['opts']['bias']", location="poly:bias")
        compiled.append(str(b.build().guards))
        return ef.GuardedCode(poly_alt.__code__, b.build())

    region = ef.compiled_region(poly, callback)
    try:
        assert region(2, [1, 2], opts={"bias": 0}) == ("compiled", 2)
        assert region(5, [3, 4], opts={"bias": 0}) == ("compiled", 2)  # hit
        assert region(2.0, [1, 2], opts={"bias": 0}) == ("compiled", 2)  # float: miss
        assert region(2, [1, 2, 3], opts={"bias": 0}) == ("compiled", 3)  # length: miss
        assert len(compiled) == 3
        assert "L['opts']['bias'] == 0  # poly:bias" in compiled[0].splitlines()
        (newest, *_) = ef.cache_entries(poly.__code__)
        reason = newest.check_fn.failure_reason({"x": 2, "coeffs": [1, 2, 3], "opts": {"bias": 1}})
        assert reason == "L['opts']['bias'] == 0; got is 1  # poly:bias"
    finally:
        clean_state()


def test_hasattr_guard_and_globals_captured_only_when_read():
    class WithX:
        x = 1

    L = {"a": WithX()}
    G = {"g": 1}
    check = GuardBuilder(L, G).hasattr_match("L['a']", "x").hasattr_match("L['a']", "y").build()
    assert check(L) and not check({"a": object()})
    assert (
        check.failure_reason({"a": object()}) == "L['a']: has attribute 'x'; got no attribute 'x'"
    )
    captured = [c.cell_contents for c in check.__closure__ or ()]
    assert not any(c is G for c in captured)
    with_global = GuardBuilder(L, G).constant_match("G['g']").build()
    assert any(c.cell_contents is G for c in with_global.__closure__)
    assert with_global({}) and not with_global.failure_reason({})
    G["g"] = 2
    assert not with_global({})


def test_builder_and_guard_set_print_the_same_lines():
    b = GuardBuilder({"n": 3, "s": "a"}).constant_match("L['n']", location="f.py:3")
    b.type_match("L['s']")
    check = b.build()
    assert str(b) == str(check.guards) == "L['n'] == 3  # f.py:3\nL['s']: type is str"
    assert len(b) == 2 and check.guards[1].kind == "type"
