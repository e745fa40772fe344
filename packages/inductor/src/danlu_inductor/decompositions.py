"""The decomposition table the compiler traces with: danlu-primtorch's canonical table,
minus ops we lower better ourselves (one loop instead of a decomposed graph: everywhere, or
on GPUs only) and ops whose library kernel beats what their decomposition lowers to (on
every device, or on the CPU only)."""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Lowered directly (see lowering/pooling.py): the window is unrolled into one loop body.
KEEP = {
    aten.max_pool2d_with_indices.default,
    aten.max_pool2d.default,
    # Decomposed, it is an accumulating index_put: ATen's kernel for that walks each run of
    # equal indices serially, and an embedding's backward is mostly repeats (T5's relative
    # position bias: 262144 indices into 32 rows took 21 ms on an H200). ATen's own
    # embedding backward sorts and reduces each run in parallel.
    aten.embedding_dense_backward.default,
    # one Welford or two-pass statistic gives both (lowering/reductions.py): decomposed, the
    # mean was a separate sum of the same values (every layer and batch norm)
    aten.var_mean.correction,
}


# Decomposed on GPUs only. Max pooling's gradient as a gather (each input position reads the
# windows that hold it) fuses with its neighbours in Triton, but the C++ loop of that gather
# stays scalar: ResNet-18's stem at batch 2 took 11.1 ms against 0.33 ms for ATen's kernel,
# which scatters each output's gradient to its argmax.
LIBRARY_ON_CPU = {
    aten.max_pool2d_with_indices_backward.default,
    aten.max_pool3d_with_indices_backward.default,
}


# Lowered directly on GPUs (lowering/softmax.py): a long row's max and sum of exponentials
# come from one online pass there, which the decomposed max, exp and sum cannot express.
# Decomposed on the CPU, whose C++ kernels hold a row in cache for the second pass.
LOWERED_ON_GPU = {
    aten._softmax.default,
    aten._log_softmax.default,
    aten.logsumexp.default,
}


def _decomposed_on_cpu_only_if(on_cpu: bool, decomposition):
    """``decomposition`` where the graph runs on the CPU's C++ backend exactly when
    ``on_cpu``; elsewhere the tracer records the op itself (ATen runs it, or a lowering
    of our own takes it)."""

    def decompose(first, *args, **kwargs):
        from danlu_inductor.pipeline.steps import triton_on_cpu

        cpu = first.device.type == "cpu" and not triton_on_cpu()
        return decomposition(first, *args, **kwargs) if cpu == on_cpu else NotImplemented

    return decompose


def decomposition_table():
    from danlu_primtorch import decomposition_table as canonical

    table = canonical("canonical")
    for op in KEEP:
        table.pop(op, None)
    for op in LIBRARY_ON_CPU:
        if op in table:
            table[op] = _decomposed_on_cpu_only_if(False, table[op])
    for op in LOWERED_ON_GPU:
        if op in table:
            table[op] = _decomposed_on_cpu_only_if(True, table[op])
    return table
