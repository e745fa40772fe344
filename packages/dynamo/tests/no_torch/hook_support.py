"""Shared pieces of the frame hook tests (no torch)."""

from __future__ import annotations

from danlu_dynamo import eval_frame as ef


def substitute(original, replacement, check_fn=lambda L: True, seen=None):
    """A callback that answers frames of `original` with `replacement`'s code."""

    def callback(frame, cache_size):
        if frame.f_code is original.__code__:
            if seen is not None:
                seen.append((dict(frame.f_locals), cache_size))
            return ef.GuardedCode(replacement.__code__, check_fn)
        return None

    return callback


def run_in_region(callback, fn, *args, **kwargs):
    return ef.compiled_region(fn, callback)(*args, **kwargs)


def clean_state():
    """Reset the cache and check that no hook is left behind."""
    assert ef.get_eval_frame() is None
    assert not ef.hook_installed()
    ef.reset()
    ef.set_cache_limit(8)
    ef.reset_stats()
