"""compile_fx on the Triton path end to end, without a GPU: CPU tensors through the same
wrapper and kernels a CUDA graph gets (DANLU_INDUCTOR_TRITON_ON_CPU=1 with the Triton
interpreter), against eager on non-contiguous inputs; every kernel also compiles ahead of
time for sm_90 in the parallel compile workers (DANLU_INDUCTOR_TRITON_CHECK_TARGET=90).
The cases live in triton_wrapper_cases.py and run once, in a child process."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="the Triton backend needs the 'triton' extra")

from child_runs import TRITON_ON_CPU_ENV, ok, run_once  # noqa: E402
from triton_wrapper_cases import CASES  # noqa: E402

import danlu_inductor  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_once(
        tmp_path_factory, "triton_wrapper_cpu", "triton_wrapper_cases.py", "cpu", TRITON_ON_CPU_ENV
    )


@pytest.mark.parametrize("name", [*CASES, "transformer_block"])
def test_compile_fx_triton_matches_eager(results, name):
    r = ok(results[name])
    assert r["kernels"] >= 1


@pytest.mark.parametrize("name", [*CASES, "transformer_block"])
def test_every_kernel_compiles_for_sm90(results, name):
    r = ok(results[name])
    aot = r["aot"]
    compiled = {a["kernel"] for a in aot}
    assert len(compiled) == r["kernels"], aot
    assert all(a["error"] is None and a["ptx"] and a["cubin"] > 0 for a in aot), aot


def test_extern_and_aten_fallbacks_run_on_the_triton_path(results):
    assert ok(results["mm_bias_gelu"])["externs"] >= 1
    assert ok(results["bmm_softmax"])["externs"] >= 1
    r = ok(results["aten_fallback_cumsum"])
    assert "aten.cumsum.default" in r["fallback_ops"], r


def test_direct_launch_is_correct_across_alignments(results):
    ok(results["direct_launch"])


def test_misaligned_bf16_matmuls_are_padded(results):
    assert ok(results["padded_matmuls"])["padded"] == 2


def test_repeated_layers_compile_each_kernel_once(results):
    r = ok(results["repeated_layers"])
    assert r["unique"] < r["kernels"], r


def test_out_of_bounds_gather_raises(results):
    assert "index out of range" in ok(results["out_of_bounds"])["raised"]


def test_failed_kernel_falls_back_to_aten_for_its_nodes(results):
    r = ok(results["forced_fallback"])
    assert r["triton_fallbacks"] and r["kernels"] >= 1
    assert "aten.erf.default" in r["fallback_ops"], r


def test_wrapper_and_kernels_are_dumped_and_importable(results):
    files = ok(results["dump"])["files"]
    assert {"wrapper.py", "kernels.py", "loop_ir.txt", "fx_graph.txt"} <= set(files), files


def test_cudagraphs_skipped_on_cpu_with_reason(results):
    r = ok(results["cudagraphs_option"])
    assert r["cudagraphs"].startswith("skipped: input 0 is on cpu"), r
    assert "out of range" in r["bad_index"], r


def test_kernel_kinds(results):
    kinds = set()
    for name in CASES:
        kinds |= set(ok(results[name])["kinds"])
    assert {"pointwise", "persistent_reduction", "reduction"} <= kinds, kinds


# ------------------------------------------------------------------ options (no triton run)
def test_validate_options_resolves_modes():
    o = danlu_inductor.validate_options({"mode": "reduce-overhead"})
    assert o.cudagraphs and not o.max_autotune
    o = danlu_inductor.validate_options({"mode": "max-autotune"})
    assert o.cudagraphs and o.max_autotune
    o = danlu_inductor.validate_options({"mode": "max-autotune", "cudagraphs": False})
    assert not o.cudagraphs and o.max_autotune
    assert danlu_inductor.validate_options(None).autotune


def test_validate_options_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid options: mode.*cudagraphs.*max_autotune"):
        danlu_inductor.validate_options({"cuda_graph": True})
    with pytest.raises(ValueError, match="valid modes"):
        danlu_inductor.validate_options({"mode": "fast"})
    with pytest.raises(ValueError, match="takes a bool"):
        danlu_inductor.validate_options({"cudagraphs": "yes"})


def test_cpu_graph_keeps_the_cpp_backend_and_reports_cudagraphs_skip():
    from helpers import aten_graph

    x = torch.randn(4, 6)
    c = danlu_inductor.compile_fx(
        aten_graph(lambda x: x.relu() * 2, x), [x], options={"mode": "reduce-overhead"}
    )
    assert c.report["backend"] == "cpp"
    assert c.report["cudagraphs"].startswith("skipped:")
    torch.testing.assert_close(c(x), x.relu() * 2)


def test_mixed_devices_run_eagerly_with_reason():
    from danlu_inductor.pipeline.steps import choose_backend

    gm = torch.fx.symbolic_trace(lambda x, y: x + y)
    kind, why = choose_backend(gm, [torch.randn(2), torch.randn(2, device="meta")])
    assert kind == "eager" and "several devices" in why


def test_max_autotune_widens_the_candidate_configs(results):
    r = ok(results["max_autotune"])
    kernels = [k for k in r.values() if isinstance(k, dict)]
    assert kernels and all(k["candidates"] > 3 for k in kernels), r


def test_cudagraph_runner_bookkeeping_without_a_gpu(results):
    """Capture replaced by re-running the call (see triton_wrapper_cases.py)."""
    r = ok(results["cudagraph_runner_logic"])
    assert r["states"][0] == "warm-up", r
    assert "out of range" in r["bad_index"], r
    assert r["mutation"].startswith("captured (1x)"), r
    # the transposed input at the same address: captured again, with it copied
    assert r["restrided"].startswith("captured (2x); 0 of 2"), r
    assert r["transposed_in_place"].startswith("captured (2x); 0 of 2"), r
    # a refused capture: the calls still ran the compiled graph (run 73 had them fail)
    assert r["capture_refused"].startswith("stopped: capture failed"), r
    first, again, fresh = r["pools"]
    assert again == first and fresh != first, r


def test_graph_artifact_round_trip_runs_like_the_original(results):
    facts = ok(results["artifact_roundtrip"])
    assert facts["mm_bias_gelu"] >= 1 and facts["embedding_gather"] >= 1
    runner = facts["cudagraph_runner"]
    assert runner["states"][0] == "warm-up", runner
    assert "out of range" in runner["bad_index"], runner
