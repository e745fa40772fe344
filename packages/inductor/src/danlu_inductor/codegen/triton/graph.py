"""Run a whole ATen graph with Triton kernels, through the existing wrapper generator.

A stopgap for tests until the wrapper has a device-aware mode: the wrapper passes
``buf.data_ptr()`` (right for ctypes) and allocates on the CPU, while Triton launchers need
the tensors themselves on the inputs' device. So the generated source is adjusted to pass
tensors, and allocations and the error flag are bound to that device.
"""

from __future__ import annotations

import torch
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


def _device_of(example_inputs) -> torch.device:
    devices = {a.device for a in example_inputs if isinstance(a, torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"inputs on several devices: {sorted(map(str, devices))}")
    return devices.pop() if devices else torch.device("cpu")


def compile_fx_triton(gm, example_inputs) -> TritonCompiledGraph:
    device = _device_of(example_inputs)
    graph = GraphLowering(gm, example_inputs).run()
    scheduler = Scheduler(graph)
    backend = _Recording()
    wrapper = WrapperCodegen(graph, scheduler, backend)
    source = wrapper.generate().replace(".data_ptr()", "")
    err_line = "_err = torch.zeros((), dtype=torch.int64)"
    source = source.replace(err_line, err_line[:-1] + ", device=_device)")
    fns, _, _ = backend.build(wrapper.kernel_names, wrapper.kernel_sources)
    namespace: dict = {}
    exec(compile(source, "<danlu_inductor triton wrapper>", "exec"), namespace)
    namespace["_device"] = device
    namespace["empty_strided"] = lambda size, stride, dtype: torch.empty_strided(
        size, stride, dtype=dtype, device=device
    )
    consts = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in wrapper.consts.items()
    }
    call = namespace["make_call"](fns, consts)
    return TritonCompiledGraph(call, graph.out_spec, source, backend.artifacts, fns, scheduler)
