"""Run a whole ATen graph with Triton kernels, through the existing wrapper generator.

A stopgap for tests until the wrapper has a device-aware mode: the wrapper passes
``buf.data_ptr()`` (right for ctypes), Triton launchers need the tensors themselves, so the
generated source is adjusted to pass tensors. Allocations stay on the CPU, so this runs
only under the Triton interpreter.
"""

from __future__ import annotations

from torch.utils import _pytree as pytree

from danlu_inductor.codegen.triton.backend import TritonBackend
from danlu_inductor.codegen.wrapper import WrapperCodegen
from danlu_inductor.graph import GraphLowering
from danlu_inductor.scheduler import Scheduler


class TritonCompiledGraph:
    def __init__(self, call, out_spec, wrapper_source, artifacts, launchers, scheduler):
        self._call = call
        self.out_spec = out_spec
        self.wrapper_source = wrapper_source
        self.artifacts = artifacts
        self.launchers = launchers
        self.scheduler = scheduler

    @property
    def kernel_source(self) -> str:
        return "\n\n".join(a.source for a in self.artifacts)

    def __call__(self, *args):
        return pytree.tree_unflatten(self._call(list(args)), self.out_spec)


class _Recording(TritonBackend):
    def __init__(self):
        self.artifacts = []

    def make_kernel(self, group, name, buffer_dtypes, local_buffers):
        art = super().make_kernel(group, name, buffer_dtypes, local_buffers)
        self.artifacts.append(art)
        return art


def compile_fx_triton(gm, example_inputs) -> TritonCompiledGraph:
    graph = GraphLowering(gm, example_inputs).run()
    scheduler = Scheduler(graph)
    backend = _Recording()
    wrapper = WrapperCodegen(graph, scheduler, backend)
    source = wrapper.generate().replace(".data_ptr()", "")
    fns, _, _ = backend.build(wrapper.kernel_names, wrapper.kernel_sources)
    namespace: dict = {}
    exec(compile(source, "<danlu_inductor triton wrapper>", "exec"), namespace)
    call = namespace["make_call"](fns, wrapper.consts)
    return TritonCompiledGraph(call, graph.out_spec, source, backend.artifacts, fns, scheduler)
