"""The frame hook answers plain function frames and leaves every other frame alone."""

import asyncio
import sys
import traceback

import pytest
from hook_support import clean_state, run_in_region, substitute

from danlu_dynamo import eval_frame as ef


@pytest.fixture(autouse=True)
def _clean():
    clean_state()
    yield
    clean_state()


def add(a, b):
    return a + b


def add_alt(a, b):
    return ("alt", a, b)


def test_substituted_function_returns_the_substitutes_value():
    seen = []
    cb = substitute(add, add_alt, seen=seen)
    assert run_in_region(cb, lambda: add(1, 2)) == ("alt", 1, 2)
    assert seen == [({"a": 1, "b": 2}, 0)]
    # outside the region the original runs and the hook is gone
    assert add(1, 2) == 3
    assert not ef.hook_installed()


def test_frame_info_exposes_code_locals_globals_builtins_closure():
    got = []

    def cb(frame, n):
        if frame.f_code is add.__code__:
            got.append(frame)
        return None

    assert run_in_region(cb, add, 4, 5) == 9
    (frame,) = got
    assert frame.f_locals == {"a": 4, "b": 5}
    assert frame.f_globals is add.__globals__
    assert frame.f_builtins["len"] is len
    assert frame.closure is None
    assert "add" in repr(frame)


def test_callback_returning_none_runs_the_original_for_every_frame():
    names = []

    def cb(frame, n):
        names.append(frame.f_code.co_name)
        return None

    def outer(x):
        return add(x, 1) + sorted([3, 1, 2])[0]

    assert run_in_region(cb, outer, 1) == 3
    assert names == ["outer", "add"]


def test_guarded_code_of_the_original_code_runs_the_frame_itself():
    cb = lambda frame, n: ef.GuardedCode(frame.f_code, lambda L: True)  # noqa: E731
    assert run_in_region(cb, add, 2, 3) == 5
    assert run_in_region(cb, add, 2, 3) == 5
    assert ef.stats()["hits"] >= 1


def gen(n):
    yield from range(n)


def gen_catch():
    try:
        yield 1
    except RuntimeError:
        yield "caught"


async def coro(x):
    await asyncio.sleep(0)
    return x * 2


async def agen():
    yield 1


def test_generators_coroutines_and_throw_are_never_shown():
    seen = []

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        return None

    def body():
        out = list(gen(3))
        g = gen_catch()
        out.append(next(g))
        out.append(g.throw(RuntimeError()))  # throwflag path
        out.append(asyncio.run(coro(21)))

        async def collect():
            return [x async for x in agen()]

        out.append(asyncio.run(collect()))
        return out

    assert run_in_region(cb, body) == [0, 1, 2, 1, "caught", 42, [1]]
    for name in ("gen", "gen_catch", "coro", "agen", "collect"):
        assert name not in seen
    assert "body" in seen


def test_module_and_class_bodies_are_not_shown():
    seen = []

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        return None

    def body():
        ns = {}
        exec("x = 1\nclass K:\n    y = 2\n", ns)
        return ns["x"] + ns["K"].y

    assert run_in_region(cb, body) == 3
    assert "<module>" not in seen and "K" not in seen


def zero_args():
    return "ran"


def test_a_function_code_object_run_by_exec_is_not_shown():
    seen = []

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        return None

    def body():
        ns = {}
        exec(zero_args.__code__, ns, ns)
        return zero_args()

    assert run_in_region(cb, body) == "ran"
    assert seen == ["body", "zero_args"]  # the exec'd run of zero_args' code was not shown


def test_exception_in_transformed_code_propagates():
    def boom(a, b):
        raise ValueError("boom from transformed code")

    with pytest.raises(ValueError, match="boom from transformed code") as info:
        run_in_region(substitute(add, boom), add, 1, 2)
    assert "boom" in "".join(traceback.format_tb(info.value.__traceback__))
    assert add(2, 3) == 5


def test_exception_in_callback_propagates():
    def cb(frame, n):
        if frame.f_code is add.__code__:
            raise KeyError("from callback")
        return None

    with pytest.raises(KeyError, match="from callback"):
        run_in_region(cb, add, 1, 2)
    assert run_in_region(lambda f, n: None, add, 1, 1) == 2


def test_exception_in_guard_propagates_and_the_cache_survives():
    def check(L):
        if L["a"] == "bad":
            raise RuntimeError("guard failed to evaluate")
        return True

    cb = substitute(add, add_alt, check)
    assert run_in_region(cb, add, 1, 2) == ("alt", 1, 2)
    with pytest.raises(RuntimeError, match="guard failed"):
        run_in_region(cb, add, "bad", 2)
    assert run_in_region(cb, add, 3, 4) == ("alt", 3, 4)
    assert len(ef.cache_entries(add.__code__)) == 1


def pos_kw(a, b=2, /, c=3, *args, d, e=5, **kw):
    return (a, b, c, args, d, e, kw)


def pos_kw_alt(a, b=2, /, c=3, *args, d, e=5, **kw):
    return ("alt", a, b, c, args, d, e, kw)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((1,), {"d": 4}),
        ((1, 20, 30, 40, 50), {"d": 4, "e": 6, "z": 7, "b": "kw-b"}),
        ((1, 2), {"c": 9, "d": 4, "y": [1]}),
    ],
)
def test_positional_only_keyword_only_varargs_varkw(args, kwargs):
    expected = ("alt",) + pos_kw(*args, **kwargs)
    seen = []
    got = run_in_region(substitute(pos_kw, pos_kw_alt, seen=seen), pos_kw, *args, **kwargs)
    assert got == expected
    locals_at_entry = seen[0][0]
    assert locals_at_entry["a"] == args[0] and locals_at_entry["d"] == kwargs["d"]
    assert locals_at_entry["args"] == tuple(args[3:])


def many(a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, *rest, s=0, **kw):
    return sum((a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, *rest, s, *kw.values()))


def many_alt(a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, *rest, s=0, **kw):
    return -sum((a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, *rest, s, *kw.values()))


def test_more_arguments_than_the_small_call_buffer():
    args = list(range(25))
    assert run_in_region(substitute(many, many_alt), many, *args, s=1, t=2) == -(sum(args) + 3)


def make_closures(k):
    cell = [k]

    def orig(x):
        return x + k + cell[0]

    def alt(x):
        return ("alt", x, k, cell[0])

    return orig, alt


def test_closure_free_variables_are_seen_and_kept():
    orig, alt = make_closures(10)
    seen = []
    assert run_in_region(substitute(orig, alt, seen=seen), orig, 1) == ("alt", 1, 10, [10][0])
    assert seen[0][0] == {"x": 1, "k": 10, "cell": [10]}
    # another closure of the same code: the cache entry runs with *its* closure
    orig2, _ = make_closures(20)
    assert orig2.__code__ is orig.__code__
    assert run_in_region(substitute(orig, alt), orig2, 1) == ("alt", 1, 20, 20)


def cell_arg(x, y):
    def inner():
        return x * 2

    return inner() + y


def cell_arg_alt(x, y):
    def inner():
        return ("alt", x)

    return inner(), y


def test_arguments_that_are_cells():
    seen = []
    assert run_in_region(substitute(cell_arg, cell_arg_alt, seen=seen), cell_arg, 3, 4) == (
        ("alt", 3),
        4,
    )
    assert seen[0][0] == {"x": 3, "y": 4}
    ef.reset()
    assert run_in_region(lambda f, n: None, cell_arg, 3, 4) == 10


def test_marked_skip_code_is_never_shown():
    seen = []

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        return None

    ef.mark_skip(add.__code__)
    assert ef.code_state(add.__code__)["skip"]
    assert run_in_region(cb, lambda: add(1, 2)) == 3
    assert "add" not in seen


def test_frames_started_by_the_callback_are_not_shown():
    seen = []

    def helper(x):
        return x

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        helper(1)  # runs with the hook suspended
        return None

    assert run_in_region(cb, add, 1, 2) == 3
    assert "helper" not in seen and "add" in seen


def test_settrace_still_works_inside_a_region():
    events = []
    seen = []

    def trace_helper(name):
        return name

    def tracer(frame, event, arg):
        if event == "call":
            events.append(trace_helper(frame.f_code.co_name))
        return None

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        if frame.f_code is add.__code__:
            return ef.GuardedCode(add_alt.__code__, lambda L: True)
        return None

    def body():
        return add(1, 2), cell_arg(1, 1)

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = run_in_region(cb, body)
    finally:
        sys.settrace(old)
    assert result == (("alt", 1, 2), 3)
    assert "body" in events and "cell_arg" in events and "add_alt" in events
    assert "trace_helper" not in seen  # frames started by the trace function: not shown


def test_invalid_callback_result_is_a_clear_error():
    cb = lambda frame, n: 42  # noqa: E731
    with pytest.raises(TypeError, match="must return a GuardedCode or None"):
        run_in_region(cb, add, 1, 2)
    assert run_in_region(lambda f, n: None, add, 1, 2) == 3


def three(a, b, c):
    return a


def add_with_cell(a, b):
    return (lambda: a)()


def free_k():
    k = 1

    def uses_k(a, b):
        return a + k

    return uses_k


@pytest.mark.parametrize(
    "other, message",
    [
        (three, "co_argcount is 3"),
        (lambda b, a: b, "argument names"),
        (lambda a, *b: a, "co_argcount is 1"),
        (free_k(), "co_freevars"),
        (add_with_cell, "co_cellvars"),
        (gen, "co_argcount"),
    ],
)
def test_transformed_code_layout_is_checked(other, message):
    with pytest.raises(ValueError, match=message):
        run_in_region(substitute(add, other), add, 1, 2)
    assert ef.cache_entries(add.__code__) == []
    assert add(1, 2) == 3


def test_generator_transformed_code_is_refused():
    def g2(a, b):
        yield a

    with pytest.raises(ValueError, match="generator"):
        run_in_region(substitute(add, g2), add, 1, 2)


def test_set_eval_frame_rejects_bad_states_and_nests():
    with pytest.raises(TypeError):
        ef.set_eval_frame(3)
    cb1 = lambda f, n: None  # noqa: E731
    prev = ef.set_eval_frame(cb1)
    try:
        assert prev is None and ef.hook_installed()
        assert ef.set_eval_frame(False) is cb1
        assert ef.get_eval_frame() is False
        assert ef.set_eval_frame(cb1) is False
    finally:
        ef.set_eval_frame(None)
    assert not ef.hook_installed()


def test_regions_nest_and_restore_on_exceptions():
    states = []
    outer_cb = lambda f, n: None  # noqa: E731
    inner_cb = lambda f, n: None  # noqa: E731

    def inner():
        states.append(ef.get_eval_frame())
        raise LookupError("inner")

    def outer():
        states.append(ef.get_eval_frame())
        with pytest.raises(LookupError):
            ef.compiled_region(inner, inner_cb)()
        states.append(ef.get_eval_frame())

    ef.compiled_region(outer, outer_cb)()
    assert states == [outer_cb, inner_cb, outer_cb]
    assert ef.get_eval_frame() is None


class Base:
    def describe(self, x):
        return ("base", x)


class Child(Base):
    def describe(self, x):
        return ("child",) + super().describe(x)

    def describe_alt(self, x):  # same free variable (__class__) as describe
        return ("alt",) + super().describe(x)


def test_methods_and_zero_argument_super():
    obj = Child()
    seen = []
    cb = substitute(Child.describe, Child.describe_alt, seen=seen)
    assert run_in_region(cb, obj.describe, 1) == ("alt", "base", 1)
    assert seen[0][0]["self"] is obj and seen[0][0]["__class__"] is Child
    assert Child.describe.__code__.co_freevars == ("__class__",)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring is new in CPython 3.12")
def test_frames_started_by_a_monitoring_callback_are_not_shown():
    mon = sys.monitoring
    tool = mon.PROFILER_ID
    seen, starts = [], []

    def monitor_helper(code):
        return code.co_name

    def on_start(code, offset):
        starts.append(monitor_helper(code))

    def cb(frame, n):
        seen.append(frame.f_code.co_name)
        if frame.f_code is add.__code__:
            return ef.GuardedCode(add_alt.__code__, lambda L: True)
        return None

    mon.use_tool_id(tool, "danlu-test")
    try:
        mon.register_callback(tool, mon.events.PY_START, on_start)
        mon.set_events(tool, mon.events.PY_START)
        result = run_in_region(cb, lambda: add(1, 2))
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
    assert result == ("alt", 1, 2)
    assert "add_alt" in starts
    assert "monitor_helper" not in seen and "on_start" not in seen


OFFSET = 100


def read_global(x):
    return x + OFFSET


def read_global_alt(x):
    return ("alt", x + OFFSET)


def test_transformed_code_runs_with_each_functions_own_globals():
    import types

    other = types.FunctionType(read_global.__code__, {"OFFSET": 7, "__builtins__": __builtins__})
    cb = substitute(read_global, read_global_alt)
    # the first compile comes from the module-level function: its entry keeps one reusable
    # function object for the transformed code; another function object must not use it
    assert run_in_region(cb, read_global, 1) == ("alt", 101)
    assert run_in_region(cb, other, 1) == ("alt", 8)
    assert run_in_region(cb, read_global, 2) == ("alt", 102)
    assert len(ef.cache_entries(read_global.__code__)) == 1
