"""Kernel counts for known patterns, so fusion regressions show up; plus the printers."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from helpers import check_same

torch.manual_seed(0)


def test_layernorm_is_one_kernel():
    x, w, b = torch.randn(64, 256), torch.randn(256), torch.randn(256)
    c = check_same(lambda x, w, b: F.layer_norm(x, (256,), w, b), x, w, b)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_softmax_is_one_kernel():
    x = torch.randn(32, 100)
    c = check_same(lambda x: torch.softmax(x, -1), x)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_log_softmax_is_one_kernel():
    x = torch.randn(16, 50)
    c = check_same(lambda x: torch.log_softmax(x, 1), x)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_gelu_chain_is_one_kernel():
    x = torch.randn(128, 64)

    def fn(x):
        return F.gelu(x * 2 + 1) * torch.sigmoid(x) - x.tanh()

    c = check_same(fn, x)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_bias_and_activation_after_mm_is_one_kernel():
    x, w, b = torch.randn(32, 64), torch.randn(64, 48), torch.randn(48)

    def fn(x, w, b):
        return F.gelu(torch.mm(x, w) + b)

    c = check_same(fn, x, w, b, rtol=1e-5, atol=1e-5)
    assert c.num_kernels == 1, c.fusion_decisions()
    assert c.report["extern_calls"] == 1


def test_linear_relu_uses_extern_plus_one_kernel():
    x, w, b = torch.randn(8, 64), torch.randn(32, 64), torch.randn(32)
    c = check_same(lambda x, w, b: torch.relu(F.linear(x, w, b)), x, w, b, rtol=1e-5, atol=1e-5)
    assert c.num_kernels == 1 and c.report["extern_calls"] == 1, c.fusion_decisions()


def test_reduction_epilogue_and_siblings_fuse():
    x = torch.randn(16, 40)

    def fn(x):
        return x.sum(1) * 2, x.amax(1) + 1, x.mean(1)

    c = check_same(fn, x)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_dead_buffers_are_removed():
    x = torch.randn(10, 10)

    def fn(x):
        unused = x.exp().sum()  # noqa: F841
        return x + 1

    c = check_same(fn, x)
    assert c.num_kernels == 1, c.fusion_decisions()


def test_in_place_reuse_of_dead_buffer():
    x, w = torch.randn(16, 16), torch.randn(16, 16)

    def fn(x, w):
        h = x.sin()
        return h + torch.mm(h, w)

    c = check_same(fn, x, w, rtol=1e-5, atol=1e-5)
    assert any("in place" in m for m in c.report["memory"]), c.wrapper_source


def test_buffer_reuse_after_free():
    x, w = torch.randn(16, 16), torch.randn(16, 16)

    def fn(x, w):
        a = torch.mm(x.sin(), w)
        b = torch.mm(a.cos(), w)
        return torch.mm(b.exp(), w)

    # exp then a 16-term sum: results reach ~1e2 and small ones come from cancellation, so the
    # tolerance follows the output's scale (float32 rounding of the large terms), not 1e-4 flat
    with torch.no_grad():
        scale = fn(x.double(), w.double()).abs().max().item()
    c = check_same(fn, x, w, rtol=1e-4, atol=1e-5 * scale)
    assert any("reuses" in m for m in c.report["memory"]), c.wrapper_source


def test_printers_show_ir_fusion_and_code():
    x = torch.randn(8, 8)
    c = check_same(lambda x: torch.softmax(x, -1) * 2, x)
    ir = c.loop_ir()
    assert "Reduction(" in ir and "type=max" in ir and "load(" in ir
    assert "fuse vertical" in c.fusion_decisions()
    assert "#pragma omp" in c.kernel_source or "for (int64_t" in c.kernel_source
    assert "from FX nodes:" in c.wrapper_source


def test_debug_dir_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_DEBUG_DIR", str(tmp_path))
    check_same(lambda x: x.relu() + 1, torch.randn(4, 4))
    dumped = list(tmp_path.glob("graph_*"))
    assert dumped
    names = {p.name for p in dumped[0].iterdir()}
    assert {"loop_ir.txt", "fusion.txt", "wrapper.py", "kernels.cpp", "fx_graph.txt"} <= names


def test_library_matmuls_write_into_reused_buffers():
    # C++ graphs: mm/addmm/bmm get out= a buffer of the wrapper's, a dead one of the same
    # layout when there is one (warm memory), and outputs and live values are never reused
    x, w, b = torch.randn(16, 16), torch.randn(16, 16), torch.randn(16)
    q, k = torch.randn(2, 8, 4), torch.randn(2, 4, 8)

    def fn(x, w, b, q, k):
        h = torch.mm(x, w).relu()  # dies after the next matmul reads it
        g = torch.addmm(b, h.sin(), w)
        out1 = torch.mm(g.cos(), w)  # a graph output: kept
        s = torch.bmm(q, k).softmax(-1)
        return out1, torch.mm(out1.exp() * 1e-3, w), s

    c = check_same(fn, x, w, b, q, k, rtol=1e-4, atol=1e-4)
    src = c.wrapper_source
    assert src.count(", out=") == 5, src
    assert any("reuses" in m for m in c.report["memory"]), src
    res = c(x, w, b, q, k)
    assert res[0].data_ptr() != res[1].data_ptr()


def test_permuted_copy_beside_a_pointwise_result_is_correct_in_two_kernels():
    # the pair from ConvNeXt's backward (a layer-norm output used as is and as an NHWC
    # copy): matched by flat index the copy's loads of x divide and jump, so each loop gets
    # its own kernel; values checked against eager, over a contiguous and a channels-last x
    w = torch.randn(8)

    def fn(x, w):
        y = x * w.view(1, -1, 1, 1) + 1
        return y, (x * 3).permute(0, 2, 3, 1).contiguous()

    c = check_same(fn, torch.randn(2, 8, 10, 12), w)
    assert c.num_kernels == 2, c.fusion_decisions()
    x = torch.randn(2, 8, 10, 12).contiguous(memory_format=torch.channels_last)
    check_same(fn, x, w)
