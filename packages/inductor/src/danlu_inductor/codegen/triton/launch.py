"""Launching a compiled Triton kernel without Triton's Python launch path.

``DirectLaunch`` skips ``JITFunction.run`` (argument binding, specialisation key, cache
lookup) once a config has launched. Its bound launch goes one step further where Triton's
CUDA launcher follows one of the two protocols read here: the launcher's ``__call__`` only
allocates scratch memory (none for our kernels) and orders the arguments for its C
``launch`` function, so the bound launch calls ``launch`` itself, one Python frame less a
kernel. The protocol is read from the launcher's source (whitespace aside); any other
source, scratch memory, or a sanitizer build keeps the launcher's own ``__call__``.
"""

from __future__ import annotations

import inspect
import logging
import re

log = logging.getLogger("danlu_inductor")

# CudaLauncher.__call__'s call of the C launch function, per Triton version family, without
# whitespace: the launch takes the scratch buffers and then __call__'s own arguments
# (kernel metadata, launch metadata, hooks, kernel arguments) as they came ...
_SCRATCH_THEN_ARGS = (
    "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,"
    "self.launch_pdl,global_scratch,profile_scratch,*args)"
)
# ... or the metadata and hooks first, the scratch buffers, the argument annotations and the
# kernel arguments as one tuple
_ANNOTATED_TUPLE = (
    "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,"
    "self.launch_pdl,kernel_metadata,launch_metadata,launch_enter_hook,launch_exit_hook,"
    "global_scratch,profile_scratch,self.arg_annotations,self.kernel_signature,kernel_args)"
)


def launch_protocol(run) -> str | None:
    """Which of the known launch protocols ``run`` (a compiled kernel's launcher) follows:
    "scratch_then_args", "annotated_tuple", or None (call ``run`` itself)."""
    try:
        if run.global_scratch_size or run.profile_scratch_size or getattr(run, "gsan_enabled", 0):
            return None
        src = re.sub(r"\s+", "", inspect.getsource(type(run).__call__))
    except Exception:  # not Triton's CUDA launcher, or no source to read
        return None
    if _SCRATCH_THEN_ARGS in src and "defallocate_scratch" in src:
        return "scratch_then_args"
    if _ANNOTATED_TUPLE in src and "kernel_args=args" in src:
        return "annotated_tuple"
    return None


def launch_call(run, function, packed):
    """(callable, the arguments between the stream and the kernel's own, flat): how a bound
    launch calls ``callable(gx, gy, gz, stream, *between, *kernel_args)`` (``flat``) or
    ``callable(gx, gy, gz, stream, *between, kernel_args)`` (not flat). Without a known
    protocol that is ``run`` itself, with no launch metadata and no hooks."""
    protocol = launch_protocol(run)
    if protocol == "scratch_then_args":
        coop, pdl = run.launch_cooperative_grid, run.launch_pdl
        return run.launch, (function, coop, pdl, None, None, packed, None, None, None), True
    if protocol == "annotated_tuple":
        coop, pdl = run.launch_cooperative_grid, run.launch_pdl
        between = (function, coop, pdl, packed, None, None, None, None, None)
        return run.launch, (*between, run.arg_annotations, run.kernel_signature), False
    return run, (function, packed, None, None, None), True


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
    def assumptions(values):
        aligned, ones, multiples = [], [], []
        for i, v in enumerate(values):
            if hasattr(v, "data_ptr"):
                if v.data_ptr() % 16 == 0:
                    aligned.append(i)
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
            checks = cls.assumptions([*args, *sizes])
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
        aligned = tuple(i for i in self.aligned if i < nargs)
        ones = tuple(i for i in self.ones if i < nargs)
        multiples = tuple(i for i in self.multiples if i < nargs)
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
            launch(gx, gy, gz, get_stream(device), *between, *args, *extra)

        def go_tuple(*args):  # the same, the kernel's arguments passed as one tuple
            for i in aligned:
                if args[i].data_ptr() & 15:
                    return slow(*args)
            for i in ones:
                if args[i] != 1:
                    return slow(*args)
            for i in multiples:
                if args[i] & 15:
                    return slow(*args)
            launch(gx, gy, gz, get_stream(device), *between, (*args, *extra))

        return go if flat else go_tuple

    def launch(self, grid, args, sizes):
        self.run(
            grid[0],
            grid[1] if len(grid) > 1 else 1,
            grid[2] if len(grid) > 2 else 1,
            self.get_stream(self.device),
            self.function,
            self.packed,
            None,
            None,
            None,
            *args,
            *sizes,
            *self.tail,
        )
