"""Reference counts, recursion and threads with the frame hook installed."""

import sys
import threading

import pytest
from hook_support import clean_state, run_in_region, substitute

from danlu_dynamo import eval_frame as ef


@pytest.fixture(autouse=True)
def _clean():
    clean_state()
    yield
    clean_state()


def target(a, *args, k=1, **kw):
    return a


def target_alt(a, *args, k=1, **kw):
    return (a, args, k, kw)


def make_adder(n):
    def adder(x):
        return x + n

    def adder_alt(x):
        return -x - n

    return adder, adder_alt


def refcounts(*objs):
    return [sys.getrefcount(o) for o in objs]


def test_refcounts_stay_flat_over_100k_substituted_calls():
    a, b, kval, zval = object(), object(), object(), object()
    adder, adder_alt = make_adder(5)
    watched = (a, b, kval, zval, target, target.__code__, target_alt.__code__, adder.__closure__[0])

    def cb(frame, n):
        if frame.f_code is target.__code__:
            return ef.GuardedCode(target_alt.__code__, lambda L: True)
        if frame.f_code is adder.__code__:
            return ef.GuardedCode(adder_alt.__code__, lambda L: True)
        return None

    def loop(n):
        for _ in range(n):
            target(a, b, k=kval, z=zval)
            target(a)
            adder(1)

    region = ef.compiled_region(loop, cb)
    region(100)  # warm-up: the cache entries exist now
    before = refcounts(*watched)
    region(100_000)
    after = refcounts(*watched)
    assert after == before
    assert ef.stats()["hits"] >= 300_000


def test_refcounts_stay_flat_on_error_and_miss_paths():
    a = object()

    def raising_guard(L):
        raise KeyError("guard")

    def raising_alt(a, *args, k=1, **kw):
        raise IndexError("transformed")

    def loop(n, exc):
        for _ in range(n):
            try:
                target(a, a, k=a, z=a)
            except exc:
                pass

    cases = [
        (substitute(target, target_alt, raising_guard), KeyError),
        (substitute(target, raising_alt), IndexError),
        (lambda f, n: 1 / 0 if f.f_code is target.__code__ else None, ZeroDivisionError),
        (lambda f, n: None, ()),  # callback declines: the original runs
    ]
    for cb, exc in cases:
        ef.reset()
        region = ef.compiled_region(loop, cb)
        region(50, exc)
        before = refcounts(a, target, target.__code__)
        region(10_000, exc)
        after = refcounts(a, target, target.__code__)  # outside the assert: no rewrite temps
        assert after == before, cb


def test_no_memory_growth_over_hits_misses_and_errors():
    import tracemalloc

    many_args = list(range(20))  # more arguments than the C side's on-stack buffer

    def cb(frame, n):
        if frame.f_code is target.__code__:
            return ef.GuardedCode(target_alt.__code__, lambda L: L["a"] != "boom")
        return None

    def loop(n):
        for i in range(n):
            target(i, *many_args, k=i, z=i)
            target(i)
            try:
                target("boom", i)  # miss -> compile -> entry; cache limit reached quickly
            except Exception:
                pass

    region = ef.compiled_region(loop, cb)
    tracemalloc.start()
    try:
        # the first round grows allocator free lists (the same happens without the hook);
        # a leak grows with every round
        region(5_000)
        before = tracemalloc.get_traced_memory()[0]
        region(5_000)
        middle = tracemalloc.get_traced_memory()[0]
        region(10_000)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert middle - before < 16 * 1024, middle - before
    assert after - middle < 16 * 1024, after - middle


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def fact_alt(n):
    return 1 if n <= 1 else n * fact(n - 1)  # re-enters the hook through `fact`


def test_recursion_through_the_callback():
    seen = []

    def cb(frame, n):
        if frame.f_code is fact.__code__:
            seen.append(frame.f_locals["n"])
        return None

    assert run_in_region(cb, fact, 300) == fact(300)
    assert len(seen) == 300


def test_recursion_through_substitution():
    # every level is answered by the cache and calls `fact` again (crosses data-stack chunks)
    assert run_in_region(substitute(fact, fact_alt), fact, 150) == fact(150)
    assert ef.stats()["hits"] == 149


def _big_frame_function(name, body, n_locals=400):
    # 400 locals: ~3 kB frames, so a few levels fill a data-stack chunk and the (big) frames the
    # hook disposes of are often the first of a fresh chunk (the 3.12 pop frees that chunk)
    local_names = [f"v{i}" for i in range(n_locals)]
    src = f"def {name}(n, payload):\n    {' = '.join(local_names)} = 0\n    {body}\n"
    ns = {}
    exec(src, ns)
    return ns[name], ns


def test_substitution_across_data_stack_chunks():
    big, ns = _big_frame_function("big", "return 0 if n == 0 else 1 + big(n - 1, payload)")
    big_alt, _ = _big_frame_function(
        "big_alt", "return 0 if n == 0 else 1 + big(n - 1, payload)", n_locals=1
    )
    ns["big"] = big
    big_alt.__globals__["big"] = big
    payload = object()
    region = ef.compiled_region(big, substitute(big, big_alt))
    assert region(60, payload) == 60
    before = sys.getrefcount(payload)
    for _ in range(200):
        assert region(60, payload) == 60
    after = sys.getrefcount(payload)
    assert after == before
    assert ef.stats()["hits"] >= 200 * 60
    if sys.version_info[:2] == (3, 12):  # the only version where our own code pops frames
        assert ef.stats()["datastack_chunks_freed"] > 0


def test_runaway_recursion_in_a_region_raises_recursion_error():
    def forever(n):
        return forever(n + 1)

    def forever_alt(n):
        return forever(n + 1)

    with pytest.raises(RecursionError):
        run_in_region(lambda f, n: None, forever, 0)
    with pytest.raises(RecursionError):  # every level answered by the cache
        run_in_region(substitute(forever, forever_alt), forever, 0)
    assert run_in_region(substitute(fact, fact_alt), fact, 10) == fact(10)


def test_deep_recursion_outside_regions_is_unaffected():
    run_in_region(lambda f, n: None, fact, 10)
    assert not ef.hook_installed()
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        # far beyond what a 3.12 interpreter allows with any eval function installed
        assert fact(5000) > 0
    finally:
        sys.setrecursionlimit(old)


def test_threads_have_their_own_callbacks():
    n_threads, n_calls = 4, 2000
    adders = [make_adder(i) for i in range(n_threads)]
    results, errors = {}, []
    start = threading.Barrier(n_threads + 1)

    def worker(i):
        adder, adder_alt = adders[i]
        cb = substitute(adder, adder_alt)

        def body():
            start.wait()
            return [adder(j) for j in range(n_calls)]

        try:
            results[i] = run_in_region(cb, body)
        except Exception as e:  # reported below
            errors.append(e)

    def plain():
        start.wait()
        results["plain"] = [adders[0][0](j) for j in range(n_calls)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    threads.append(threading.Thread(target=plain))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(n_threads):
        assert results[i] == [-j - i for j in range(n_calls)]
    # a thread outside any region never sees another thread's callback or cache
    assert results["plain"] == list(range(n_calls))
    assert ef.stats()["active_threads"] == 0


def test_threads_compiling_the_same_code_concurrently():
    n_threads, n_calls = 4, 300
    ef.set_cache_limit(6)
    errors, results = [], {}
    start = threading.Barrier(n_threads)

    def scale(x):
        return x * 2

    def scale_alt(x):
        return ("cached", x)

    def callback(frame, cache_size):
        if frame.f_code is not scale.__code__:
            return None
        x = frame.f_locals["x"]
        return ef.GuardedCode(scale_alt.__code__, lambda L: L["x"] == x)

    def worker(i):
        def body():
            start.wait()
            return [scale(j % 10) for j in range(n_calls)]

        try:
            results[i] = run_in_region(callback, body)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, also inside callbacks
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []
    for i in range(n_threads):
        # a value is either served by an entry or (past the limit) run eagerly: never wrong
        assert all(r in (("cached", j % 10), (j % 10) * 2) for j, r in enumerate(results[i]))
    assert len(ef.cache_entries(scale.__code__)) == 6
