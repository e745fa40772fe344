"""Timing a GPU call from the benchmark scripts: CUDA events around back-to-back calls."""

import torch


def per_call_us(fn, *args, reps=30, warmup=3) -> float:
    """Microseconds a call of ``fn(*args)``, from CUDA events around ``reps`` back-to-back
    calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps * 1000
