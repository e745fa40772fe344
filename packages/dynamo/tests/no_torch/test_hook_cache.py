"""The per-code cache: order, run-only mode, the recompile limit and reset."""

import logging

import pytest
from hook_support import clean_state, run_in_region

from danlu_dynamo import eval_frame as ef


@pytest.fixture(autouse=True)
def _clean():
    clean_state()
    yield
    clean_state()


def scale(x):
    return x * 2


def scale_alt(x):
    return ("cached", x)


def value_guard(value):
    def check_fn(L):
        return L["x"] == value

    check_fn.failure_reason = lambda L: None if L["x"] == value else f"L['x'] == {value!r}"
    check_fn.value = value
    return check_fn


def compiler(log):
    """Compiles `scale` for each new value of x, recording each call."""

    def callback(frame, cache_size):
        if frame.f_code is not scale.__code__:
            return None
        log.append((frame.f_locals["x"], cache_size))
        return ef.GuardedCode(scale_alt.__code__, value_guard(frame.f_locals["x"]))

    return callback


def cached_values():
    return [g.check_fn.value for g in ef.cache_entries(scale.__code__)]


def test_miss_compiles_hit_reuses_most_recent_first():
    log = []
    cb = compiler(log)
    for x in (1, 2, 1, 3, 2, 2):
        assert run_in_region(cb, scale, x) == ("cached", x)
    assert log == [(1, 0), (2, 1), (3, 2)]
    assert cached_values() == [2, 3, 1]
    st = ef.stats()
    assert st["hits"] == 3 and st["misses"] == 3


def test_run_only_mode_uses_the_cache_and_never_compiles():
    log = []
    assert run_in_region(compiler(log), scale, 5) == ("cached", 5)
    assert run_in_region(False, scale, 5) == ("cached", 5)
    assert run_in_region(False, scale, 6) == 12
    assert log == [(5, 0)]
    assert cached_values() == [5]


def test_recompile_limit_runs_eagerly_and_logs_the_failing_guard(caplog):
    ef.set_cache_limit(3)
    log = []
    cb = compiler(log)
    with caplog.at_level(logging.WARNING, logger="danlu_dynamo"):
        results = [run_in_region(cb, scale, x) for x in (1, 2, 3, 4, 5, 2)]
    assert results == [("cached", 1), ("cached", 2), ("cached", 3), 8, 10, ("cached", 2)]
    assert [x for x, _ in log] == [1, 2, 3]
    records = [r for r in caplog.records if r.name == "danlu_dynamo"]
    assert len(records) == 1  # one clear line, not one per call
    message = records[0].getMessage()
    assert "recompile limit (3)" in message and "scale" in message
    assert "L['x'] == 3" in message  # the most recent entry's guard, failing for x=4
    assert ef.code_state(scale.__code__)["stopped"]
    assert ef.stats()["cache_limit_hits"] == 1


def test_recompile_limit_without_failure_reason_says_so(caplog):
    ef.set_cache_limit(1)

    def cb(frame, n):
        if frame.f_code is scale.__code__:
            x = frame.f_locals["x"]
            return ef.GuardedCode(scale_alt.__code__, lambda L: L["x"] == x)
        return None

    with caplog.at_level(logging.WARNING, logger="danlu_dynamo"):
        assert run_in_region(cb, scale, 1) == ("cached", 1)
        assert run_in_region(cb, scale, 2) == 4
    assert "gives no failure_reason" in caplog.records[-1].getMessage()


def test_reset_drops_entries_and_stops():
    ef.set_cache_limit(1)
    log = []
    run_in_region(compiler(log), scale, 1)
    run_in_region(compiler(log), scale, 2)
    assert ef.code_state(scale.__code__)["stopped"]
    ef.reset()
    assert ef.cache_entries(scale.__code__) == []
    assert not ef.code_state(scale.__code__)["stopped"]
    assert run_in_region(compiler(log), scale, 2) == ("cached", 2)
    assert [x for x, _ in log] == [1, 2]


def test_callback_may_mark_the_code_skip():
    calls = []

    def cb(frame, n):
        if frame.f_code is scale.__code__:
            calls.append(1)
            ef.mark_skip(frame.f_code)
        return None

    for _ in range(3):
        assert run_in_region(cb, scale, 2) == 4
    assert calls == [1]


def test_set_cache_limit_validates_and_returns_the_old_value():
    assert ef.set_cache_limit(4) == 8
    assert ef.get_cache_limit() == 4
    with pytest.raises(ValueError):
        ef.set_cache_limit(0)


def test_cache_entry_dies_with_its_code_object():
    import gc
    import weakref

    def compile_once():
        ns = {}
        exec("def f(x):\n    return x\n", ns)
        f = ns.pop("f")
        check = value_guard(1)

        def cb(frame, n):
            if frame.f_code is f.__code__:
                return ef.GuardedCode(scale_alt.__code__, check)
            return None

        assert run_in_region(cb, f, 1) == ("cached", 1)
        assert len(ef.cache_entries(f.__code__)) == 1
        return weakref.ref(check)

    ref = compile_once()
    gc.collect()
    assert ref() is None


def test_miss_reasons_name_each_entrys_failing_guard():
    run_in_region(compiler([]), scale, 1)
    run_in_region(compiler([]), scale, 2)
    assert ef.miss_reasons(scale.__code__, {"x": 3}) == ["L['x'] == 2", "L['x'] == 1"]
    assert ef.miss_reasons(scale.__code__, {"x": 1}) == ["L['x'] == 2", None]


def test_reset_inside_the_callback_and_inside_a_guard():
    def check_fn(L):
        ef.reset()  # drops the list being walked; the walk holds its own references
        return L["x"] == 1

    def callback(frame, cache_size):
        if frame.f_code is not scale.__code__:
            return None
        ef.reset()
        return ef.GuardedCode(scale_alt.__code__, check_fn)

    assert run_in_region(callback, scale, 1) == ("cached", 1)
    assert len(ef.cache_entries(scale.__code__)) == 1
    assert run_in_region(callback, scale, 1) == ("cached", 1)  # hit; the guard reset the cache
    assert ef.cache_entries(scale.__code__) == []
    assert run_in_region(callback, scale, 2) == ("cached", 2)  # compiled again
