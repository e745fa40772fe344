"""What the frame hook costs per Python call.

    python benchmarks/dynamo_hook.py [--calls N] [--rounds R]

Runs without torch (the rows with generated guards appear only where torch is installed: they
come from capture's GuardSet, as compiled frames' checks do), so it can be run on every CPython
the hook supports. Two questions:

1. Inside a compiled region, what does the hook add to each Python call that it lets through?
   A call-bound loop (`small(i)` N times) timed with the hook off, and inside a region where
   the callee's code is marked skip (the steady state for frames the compiler declined) and in
   run-only mode with nothing cached.
2. What does a cache hit cost: building the entry locals, the guard check and the call of the
   transformed code, against a plain call of the same function?

Each variant is timed R times, interleaved, and the median per-call time is reported in ns.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from danlu_dynamo import eval_frame as ef


def small(x):
    return x


def small_copy(x):  # the "transformed" code of a cache hit: same work
    return x


def loop(n, x):
    f = small
    for _ in range(n):
        f(x)


def plain_loop(n, x):
    f = small_copy  # never cached, never hooked: the reference call
    for _ in range(n):
        f(x)


def cached(check_fn):
    def callback(frame, cache_size):
        if frame.f_code is small.__code__:
            return ef.GuardedCode(small_copy.__code__, check_fn)
        return None

    return callback


def variants(calls: int, with_torch: bool = True):
    def skip_callback(frame, cache_size):
        ef.mark_skip(frame.f_code)
        return None

    def true_check(L):
        return True

    out = {
        "hook off": lambda: plain_loop(calls, 1),
        "hook on, callee marked skip": lambda: ef.compiled_region(plain_loop, skip_callback)(
            calls, 1
        ),
        "hook on, run-only, nothing cached": lambda: ef.compiled_region(plain_loop, False)(
            calls, 1
        ),
        "cache hit, check_fn = lambda: True": ("hit", true_check),
    }
    torch = None
    if with_torch:
        try:
            import torch
        except ImportError:
            pass
    if torch is not None:
        from danlu_dynamo.capture.guard_codegen import GuardSet

        one = GuardSet()
        one.type_match("L['x']", 1)
        out["cache hit, 1 type guard (GuardSet)"] = ("hit", one.compile_for_frame({}, ()))
        t = torch.randn(4, 4)
        full = GuardSet()
        full.global_state()  # every compiled frame has these 4
        full.tensor_match("L['x']", t)
        out["cache hit, tensor + global-state guards"] = ("hit", full.compile_for_frame({}, ()), t)
    return out


def time_variant(spec, calls: int) -> float:
    if isinstance(spec, tuple):  # a cache hit: compile once, then time hits
        _, check_fn, *arg = spec
        x = arg[0] if arg else 1
        ef.reset()
        region = ef.compiled_region(loop, cached(check_fn))
        region(1, x)  # compiles `small`
        ef.reset_stats()
        start = time.perf_counter()
        region(calls, x)
        dt = time.perf_counter() - start
        assert ef.stats()["hits"] == calls, ef.stats()
        return dt
    ef.reset()
    start = time.perf_counter()
    spec()
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument(
        "--only",
        choices=["off", "skip", "hit"],
        help="run one loop of --calls calls and print nothing (for instruction counting: "
        "valgrind --tool=callgrind, minus a --calls 0 run)",
    )
    args = p.parse_args()
    if args.only:
        names = {"off": "hook off", "skip": "hook on, callee marked skip"}
        spec = variants(args.calls, with_torch=False)
        spec = spec.get(names.get(args.only), ("hit", lambda L: True))
        time_variant(spec, args.calls)
        return
    specs = variants(args.calls)
    for spec in specs.values():  # warm-up
        time_variant(spec, args.calls // 10)
    times = {name: [] for name in specs}
    for _ in range(args.rounds):
        for name, spec in specs.items():
            times[name].append(time_variant(spec, args.calls))
    ef.reset()
    base = statistics.median(times["hook off"]) / args.calls * 1e9
    print(
        f"CPython {platform.python_version()} ({sys.platform}), {args.calls} calls x "
        f"{args.rounds} rounds, median ns per call"
    )
    print(f"{'variant':44s} {'ns/call':>8s} {'vs off':>7s} {'extra ns':>9s}")
    for name, ts in times.items():
        ns = statistics.median(ts) / args.calls * 1e9
        print(f"{name:44s} {ns:8.1f} {ns / base:6.2f}x {ns - base:+9.1f}")


if __name__ == "__main__":
    main()
