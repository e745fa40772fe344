"""Launching a compiled Triton kernel without Triton's Python launch path.

``DirectLaunch`` skips ``JITFunction.run`` (argument binding, specialisation key, cache
lookup) once a config has launched. Its bound launch goes one step further: Triton's CUDA
launcher (``CompiledKernel.run``) is a Python object whose ``__call__`` allocates scratch
memory (none for our kernels) and hands its arguments, in its own order, to a C ``launch``
function. That order differs between Triton versions, so it is not assumed: a probe calls
the launcher's own ``__call__`` on a copy of it whose ``launch`` only records, once per
kernel, and the bound launch calls ``launch`` itself only with an argument list equal to
what was recorded (one of the two layouts below). Anything else (another layout, scratch
memory, a sanitizer build, a probe that fails) keeps the launcher's ``__call__``.
"""

from __future__ import annotations

import logging

log = logging.getLogger("danlu_inductor")


def _layouts(run, function, packed):
    """Candidate (name, between, flat): how the C launch function may take its arguments
    after the grid and stream. ``flat``: the kernel's arguments follow one by one; else
    they come as one tuple, after the argument annotations."""
    coop = getattr(run, "launch_cooperative_grid", None)
    pdl = getattr(run, "launch_pdl", None)
    # the scratch buffers, then the launcher's own arguments as given (metadata, hooks, ...)
    yield "scratch_then_args", (function, coop, pdl, None, None, packed, None, None, None), True
    if hasattr(run, "arg_annotations") and hasattr(run, "kernel_signature"):
        # metadata and hooks, the scratch buffers, the annotations, the arguments as a tuple
        between = (function, coop, pdl, packed, None, None, None, None, None)
        yield "annotated_tuple", (*between, run.arg_annotations, run.kernel_signature), False


def _probe(run, function, packed):
    """The arguments ``run.__call__`` hands its C launch function for a sample launch (no
    launch metadata, no hooks), recorded on a copy of ``run``; None if that fails."""
    calls = []
    try:
        probe = object.__new__(type(run))
        probe.__dict__.update(vars(run))
        probe.launch = lambda *a: calls.append(a)
        type(run).__call__(probe, 3, 2, 1, "stream", function, packed, None, None, None, "a", 7)
    except Exception as e:  # not Triton's launcher as we know it: keep calling it
        log.debug("danlu_inductor: launcher probe failed: %s", e)
        return None
    return calls[0] if len(calls) == 1 else None


def launch_protocol(run, function=None, packed=None) -> str | None:
    """Which argument layout ``run`` (a compiled kernel's launcher) passes to its C launch
    function, checked by a probe: "scratch_then_args", "annotated_tuple", or None."""
    found = _checked_layout(run, function, packed)
    return found[0] if found else None


def _checked_layout(run, function, packed):
    try:
        if run.global_scratch_size or run.profile_scratch_size or getattr(run, "gsan_enabled", 0):
            return None  # its __call__ allocates or instruments: keep it
        c_launch = run.launch
    except AttributeError:
        return None
    if not callable(c_launch):
        return None
    recorded = _probe(run, function, packed)
    if recorded is None:
        return None
    for name, between, flat in _layouts(run, function, packed):
        expect = (3, 2, 1, "stream", *between, *(("a", 7) if flat else (("a", 7),)))
        if recorded == expect:
            return name, between, flat
    return None


def launch_call(run, function, packed):
    """(callable, the arguments between the stream and the kernel's own, flat): how a bound
    launch calls ``callable(gx, gy, gz, stream, *between, *kernel_args)`` (``flat``) or
    ``callable(gx, gy, gz, stream, *between, kernel_args)`` (not flat): the C launch
    function where the probe confirmed the layout, else ``run`` itself with no launch
    metadata and no hooks."""
    found = _checked_layout(run, function, packed)
    if found is not None:
        _, between, flat = found
        return run.launch, between, flat
    return run, _own_call_between(function, packed), True


def _own_call_between(function, packed):
    """The launcher's own ``__call__``: after the grid and stream, the kernel function, its
    packed metadata, no launch metadata and no enter or exit hook."""
    return function, packed, None, None, None


class DirectLaunch:
    """Launches a compiled kernel without going through ``JITFunction.run``.

    Triton's Python launch path binds the arguments, recomputes the specialisation key and
    looks the kernel up on every call (tens of microseconds; a graph launches hundreds of
    kernels). After the first launch of a config we keep the compiled kernel and call its
    launcher directly while the arguments still meet what Triton compiled it for: a tensor
    that was 16-byte aligned must still be, an integer that was 1 must still be 1, one that
    was a multiple of 16 must still be. (What was not assumed needs no check: the kernel
    compiled without the assumption runs for any value.) Anything else takes the normal path.
    """

    unavailable: str | None = None  # why the last attempt failed (for tests and logs)

    def __init__(self, kernel, tail, checks, stream):
        self.run = kernel.run
        self.function = kernel.function
        self.packed = kernel.packed_metadata
        self.tail = tail  # the constexpr values, after the arguments and sizes
        self.aligned, self.ones, self.multiples = checks
        self.get_stream, self.device = stream

    @staticmethod
    def assumptions(values, unspecialized=frozenset()):
        """What Triton compiled the kernel for, given the first launch's ``values``; an
        integer at a position in ``unspecialized`` (``do_not_specialize``: a symbolic
        graph's sizes) was compiled for any value and is not checked. Checking it sent
        every later size with another remainder mod 16 down Triton's slow launch path."""
        aligned, ones, multiples = [], [], []
        for i, v in enumerate(values):
            if hasattr(v, "data_ptr"):
                if v.data_ptr() % 16 == 0:
                    aligned.append(i)
            elif i in unspecialized:
                continue
            elif isinstance(v, int) and not isinstance(v, bool):
                if v == 1:
                    ones.append(i)
                elif v % 16 == 0:
                    multiples.append(i)
        return tuple(aligned), tuple(ones), tuple(multiples)

    @classmethod
    def make(cls, fn, kernel, cfg, args, sizes):
        try:
            import triton

            hooks = triton.knobs.runtime
            for hook in (hooks.launch_enter_hook, hooks.launch_exit_hook):
                # None, or an empty chain of hooks (Triton >= 3.5): nothing to call
                if hook is not None and getattr(hook, "calls", True):
                    DirectLaunch.unavailable = "Triton launch hooks are set"
                    return None
            if hasattr(kernel, "result"):  # some Triton versions hand back a future
                kernel = kernel.result()
            kernel._init_handles()
            consts = cfg.kwargs()
            names = list(fn.arg_names)
            n = len(args) + len(sizes)
            if names[n:] != list(consts):  # arguments, sizes, then the constexprs
                DirectLaunch.unavailable = f"unexpected kernel signature {names}"
                return None
            driver = triton.runtime.driver.active
            stream = (driver.get_current_stream, driver.get_current_device())
            params = getattr(fn, "params", ())
            free = {i for i, p in enumerate(params) if getattr(p, "do_not_specialize", False)}
            checks = cls.assumptions([*args, *sizes], free)
            return cls(kernel, tuple(consts.values()), checks, stream)
        except Exception as e:  # another Triton version: keep the normal launch path
            log.debug("danlu_inductor: direct launch unavailable: %s", e)
            DirectLaunch.unavailable = f"{type(e).__name__}: {e}"
            return None

    def matches(self, args, sizes) -> bool:
        values = (*args, *sizes) if sizes else args
        for i in self.aligned:
            if values[i].data_ptr() & 15:
                return False
        for i in self.ones:
            if values[i] != 1:
                return False
        for i in self.multiples:
            if values[i] & 15:
                return False
        return True

    def bind(self, grid, sizes, nargs, slow):
        """``go(*args)``: this launch with ``grid`` and the (static) ``sizes`` fixed, the
        arguments' assumptions checked inline, ``slow(*args)`` where one fails. None when the
        sizes themselves do not meet the assumptions (they were checked when compiled)."""
        fixed = (None,) * nargs + tuple(sizes)
        if any(i >= nargs and fixed[i] != 1 for i in self.ones) or any(
            i >= nargs and fixed[i] & 15 for i in self.multiples
        ):
            return None
        aligned, ones, multiples = self._argument_checks(nargs)
        launch, between, flat = launch_call(self.run, self.function, self.packed)
        get_stream, device = self.get_stream, self.device
        gx, gy, gz = (*grid, 1, 1)[:3]
        extra = (*sizes, *self.tail)

        def go(*args):
            for i in aligned:
                if args[i].data_ptr() & 15:
                    return slow(*args)
            for i in ones:
                if args[i] != 1:
                    return slow(*args)
            for i in multiples:
                if args[i] & 15:
                    return slow(*args)
            if flat:
                launch(gx, gy, gz, get_stream(device), *between, *args, *extra)
            else:  # the kernel's arguments as one tuple
                launch(gx, gy, gz, get_stream(device), *between, (*args, *extra))

        return go

    def bind_symbolic(self, shape, nargs, slow):
        """``go(*args)`` for a kernel of symbolic sizes: ``shape(args)`` gives this call's grid
        and the size arguments that follow the kernel's own (its ``xnumel``, ``rnumel``), the
        arguments' assumptions are checked inline, ``slow(*args)`` where one fails. None where
        Triton specialised on one of those sizes (symbolic kernels tell it not to:
        ``do_not_specialize``). Without it every launch of a symbolic graph went through the
        launcher's config lookup, ``matches`` and the launcher's own ``__call__``."""
        if any(i >= nargs for i in (*self.ones, *self.multiples)):
            return None
        aligned, ones, multiples = self._argument_checks(nargs)
        launch, between, flat = launch_call(self.run, self.function, self.packed)
        get_stream, device, tail = self.get_stream, self.device, self.tail

        def go(*args):
            # the checks are ``bind``'s, inline in both closures: a shared helper would be
            # one more Python call on every launch
            for i in aligned:
                if args[i].data_ptr() & 15:
                    return slow(*args)
            for i in ones:
                if args[i] != 1:
                    return slow(*args)
            for i in multiples:
                if args[i] & 15:
                    return slow(*args)
            grid, sizes = shape(args)
            if 0 in grid:  # empty tensors: nothing to compute (CUDA rejects empty grids)
                return
            gx, gy, gz = (*grid, 1, 1)[:3]
            if flat:
                launch(gx, gy, gz, get_stream(device), *between, *args, *sizes, *tail)
            else:  # the kernel's arguments as one tuple
                launch(gx, gy, gz, get_stream(device), *between, (*args, *sizes, *tail))

        return go

    def _argument_checks(self, nargs):
        """The checks on the kernel's own arguments (not the size arguments after them)."""
        return tuple(
            tuple(i for i in checks if i < nargs)
            for checks in (self.aligned, self.ones, self.multiples)
        )

    def launch(self, grid, args, sizes):
        self.run(
            grid[0],
            grid[1] if len(grid) > 1 else 1,
            grid[2] if len(grid) > 2 else 1,
            self.get_stream(self.device),
            *_own_call_between(self.function, self.packed),
            *args,
            *sizes,
            *self.tail,
        )
