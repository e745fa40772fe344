"""Failures inside danlu end in eager execution, never in the user's lap.

A backend can fail in two places. At capture time (the backend call itself): the recording
backend catches that and hands back the captured graph to run as it is. And at a call:
aotautograd traces lazily (dynamic shapes trace at the first call with real sizes; a new
input signature traces again) and kernels are built and launched then, so a lowering, a
Triton compile or a launch can fail inside the compiled callable. ``EagerOnFailure`` wraps it:
when a call fails, the captured graph runs eagerly on the same arguments. If eager succeeds,
the failure was danlu's: the graph runs eagerly from then on and the reason is logged and kept
in the stats. If eager fails too, the error is the program's own and eager's exception reaches
the caller, as it would without danlu.

Not retried: errors the compiled code reports on the program's behalf (an index out of range,
``program_error``), and CUDA errors (the context is unusable; an eager rerun would only fail
somewhere less telling). A failure inside a compiled backward (during ``loss.backward()``)
is not covered: the forward already ran compiled and its eager twin's graph does not exist.
"""

from __future__ import annotations

import logging

log = logging.getLogger("danlu")


def _retryable(e: BaseException) -> bool:
    if getattr(e, "program_error", False):
        return False
    if type(e).__name__ == "AcceleratorError" or "CUDA error" in str(e):
        return False
    return True


class EagerOnFailure:
    """Calls the compiled graph; on a failure that is danlu's, the captured graph instead."""

    def __init__(self, compiled, gm, record, on_fallback=None):
        self.compiled = compiled
        self.gm = gm
        self.record = record
        self.on_fallback = on_fallback
        self.reason: str | None = None

    def __call__(self, *args):
        try:
            return self.compiled(*args)
        except Exception as e:
            if self.reason is not None or not _retryable(e):
                raise
            failure = e
        out = self._eager(*args)  # the program's own error, if eager fails too
        self._switch(failure)
        return out

    def _eager(self, *args):
        from danlu_dynamo import eval_frame

        # the graph's own code is plain torch calls: never captured again
        eval_frame.mark_skip(type(self.gm).forward.__code__)
        return self.gm(*args)

    def _switch(self, e: Exception) -> None:
        self.reason = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        index = getattr(self.record, "index", "?")
        log.warning(
            "compiled graph %s failed at a call (%s); it runs eagerly from now on",
            index,
            self.reason,
        )
        if self.record is not None:
            self.record.error = f"failed at a call: {self.reason}"
        self.compiled = self.gm
        if self.on_fallback is not None:
            self.on_fallback(self.reason)

    def __getattr__(self, name):
        return getattr(self.__dict__["compiled"], name)
