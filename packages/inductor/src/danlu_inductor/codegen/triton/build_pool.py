"""A pool of build worker processes forked from one helper process.

Spawned workers each import torch (the Triton driver needs it): 16 of them starting at once
took 6-8 s to all answer on an H100 host, about 50 CPU-seconds that several compiling
processes side by side (the suite's jobs) paid once each. Here one helper process is
spawned (a fresh interpreter, never a fork of the caller, whose CUDA state a fork must not
copy); it imports torch and this package once and forks its workers before it starts any
thread. Starting the pool does not block the caller: the spawn returns at once, and jobs
submitted before the helper is ready wait in its pipe. (A multiprocessing fork server does
the same import once, but its first start blocks the caller until that import is done.)

``HelperPool.submit(fn, *args)`` returns a ``concurrent.futures.Future``; ``fn`` and the
arguments go to the helper and from it to a worker, so both must pickle by reference or
value. A job whose worker or helper dies fails with ``BrokenProcessPool``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import multiprocessing
import sys
import threading
import types
from concurrent.futures.process import BrokenProcessPool

# reentrant: a pool made inside ``without_main`` starts its helper inside it too
_SPAWN_LOCK = threading.RLock()


@contextlib.contextmanager
def without_main():
    """While a process is spawned: a ``__main__`` with no file and no spec, so that
    multiprocessing gives the new process nothing of the user's main module to import (it
    would run a script's top-level code, the model and its training loop, again)."""
    with _SPAWN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class HelperPool:
    def __init__(self, workers: int, initializer=None, initargs=()):
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_helper_main,
            args=(child, workers, initializer, initargs),
            name="danlu-build-helper",
        )
        with without_main():
            self._proc.start()
        child.close()
        self._lock = threading.Lock()  # sends, the table of pending jobs, the closed flag
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._ids = itertools.count()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="danlu-build-results", daemon=True)
        self._reader.start()

    def submit(self, fn, *args) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit a build job after the pool shut down")
            job = next(self._ids)
            self._pending[job] = fut
            try:
                self._conn.send((job, fn, args))
            except OSError as e:
                del self._pending[job]
                raise BrokenProcessPool(f"the build helper process is gone: {e}") from e
        return fut

    def _read(self):
        while True:
            try:
                job, ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                fut = self._pending.pop(job, None)
            if fut is None or not fut.set_running_or_notify_cancel():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)
        with self._lock:  # the helper exited: nothing pending will be answered
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if fut.set_running_or_notify_cancel():
                fut.set_exception(BrokenProcessPool("the build helper process exited"))

    def alive(self) -> bool:
        """False once the helper exited (killed, or a broken pool of its own)."""
        return self._proc.is_alive() and not self._closed

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if cancel_futures:
                for fut in self._pending.values():
                    fut.cancel()
            with contextlib.suppress(OSError):
                self._conn.send(None)
        if wait:
            self._proc.join(timeout=60)
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(timeout=5)
            self._reader.join(timeout=5)


def _start_worker(conn, initializer, initargs):
    # a worker keeps no copy of the helper's end of the pipe (the caller sees the helper's
    # exit as the pipe's end) and dies with the helper (Linux), not left waiting for jobs
    conn.close()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes
            import signal

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if initializer is not None:
        initializer(*initargs)


def _helper_main(conn, workers, initializer, initargs):
    # forked workers: this process has imported torch (unpickling this function imported
    # the package) and has no CUDA state; every worker forks now, before a thread exists
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(conn, initializer, initargs),
    )
    for f in [pool.submit(int) for _ in range(workers)]:
        f.result()
    send = threading.Lock()

    def reply(job, fut):
        try:
            msg = (job, True, fut.result())
        except BaseException as e:  # the job's own exception, or a dead worker's
            msg = (job, False, e)
        with send:
            try:
                conn.send(msg)
            except Exception as e:  # an unpicklable result or exception
                conn.send((job, False, RuntimeError(f"build job {job}: {type(e).__name__}: {e}")))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        job, fn, args = msg
        try:
            fut = pool.submit(fn, *args)
        except Exception as e:  # a broken pool: say so for this job
            fut = concurrent.futures.Future()
            fut.set_exception(e)
        fut.add_done_callback(functools.partial(reply, job))
    pool.shutdown(wait=True, cancel_futures=True)
