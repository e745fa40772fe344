"""NumPy code on tensors compiles through the whole stack (capture traces it as tensor ops,
inductor generates kernels), with NumPy's dtypes."""

import numpy as np
import torch

import danlu


def program(x, w):
    a = x.numpy()
    h = np.tanh(a @ w.numpy().T) * 0.5 + np.maximum(a.sum(axis=1, keepdims=True), 0)
    return torch.from_numpy(h.astype(np.float64)).relu(), np.mean(h)


def test_numpy_program_compiles_to_kernels_and_matches_eager():
    danlu.reset()
    compiled = danlu.compile(program)
    for n in (3, 3, 3):
        x, w = torch.randn(n, 8), torch.randn(5, 8)
        out, mean = compiled(x, w)
        ref, ref_mean = program(x, w)
        assert out.dtype == torch.float64 and type(mean) is np.float32
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)  # float32 math, widened
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-5)
    stats = danlu.CompileStats.current()
    assert len(stats.graphs) == 1 and stats.graph_breaks == 0
    assert stats.graphs[0].kernels >= 1
