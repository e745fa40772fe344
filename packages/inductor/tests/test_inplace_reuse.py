"""Writing a kernel's output into an input buffer that dies in that kernel ("in place") is
only safe when nothing reads that input after the write. A reduction kernel runs several
passes over its reduced dim and may read the input again in a later pass."""

from __future__ import annotations

import torch

from danlu_inductor import compile_fx
from danlu_inductor.decompositions import decomposition_table
from danlu_primtorch import trace


def _softmax_of_saved_sum(x, w, g):
    h = x * 2
    s = h + h @ w  # an output, written during the first pass of the softmax kernel
    return s, torch.softmax(s * g, -1)


def test_multi_pass_reduction_does_not_overwrite_an_input_it_reads_again():
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    args = [torch.randn(10, 8, generator=gen), torch.randn(8, 8, generator=gen)]
    args.append(torch.randn(8, generator=gen))
    with torch.no_grad():
        gm = trace(_softmax_of_saved_sum, *args, decompositions=decomposition_table())
        compiled = compile_fx(gm, args)
        got = compiled(*args)
        want = _softmax_of_saved_sum(*args)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
