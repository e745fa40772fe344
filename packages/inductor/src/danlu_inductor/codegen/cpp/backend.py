"""The C++ backend's face to the wrapper: make kernels, build them into one library."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from danlu_inductor.codegen.cpp.compiler import compile_kernels
from danlu_inductor.codegen.cpp.kernel import CppKernel
from danlu_inductor.codegen.cpp.prelude import PRELUDE


@dataclass
class KernelArtifact:
    name: str
    source: str
    params: list[str]  # buffer names, in the C function's parameter order
    uses_err: bool
    size_args: list[str] = field(default_factory=list)  # symbolic sizes, after the pointers


class CppBackend:
    name = "cpp"

    def make_kernel(self, group, name, buffer_dtypes, local_buffers) -> KernelArtifact:
        k = CppKernel(group, name, buffer_dtypes, local_buffers, outputs=None)
        source = k.codegen()
        return KernelArtifact(name, source, list(k.params), k.uses_indirect, list(k.size_args))

    def build(self, kernel_names, kernel_sources, nargs, nsizes=None):
        """``nargs``: pointer arguments per kernel; ``nsizes``: int64 arguments after them."""
        if not kernel_names:
            return {}, None, ""
        lib, path, source = compile_kernels(PRELUDE, list(kernel_sources), kernel_names)
        fns = {}
        for n in kernel_names:
            fn = getattr(lib, n)
            fn.restype = None
            ints = (nsizes or {}).get(n, 0)
            fn.argtypes = [ctypes.c_void_p] * nargs[n] + [ctypes.c_int64] * ints
            fns[n] = fn
        return fns, path, source
