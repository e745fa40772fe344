"""Column sums beside a row reduction of the same values (a norm's backward) on GPU graphs:
split by the row kernel's block of rows and placed in it ("xsum"), the many partials summed in
groups before the last stage, unless the option is off or
no row reduction shares their values. Checked on the scheduler's groups; the generated
kernels' values are checked under the Triton interpreter (triton_cases.py's
``*_row_blocks`` cases)."""

from __future__ import annotations

import torch
from helpers import aten_graph

from danlu_inductor.codegen.triton.heuristics import heuristic_config, persistent_rows_per_program
from danlu_inductor.options import validate_options
from danlu_inductor.pipeline.steps import lower, schedule


def _rms_backward(g, h, w):
    r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    xhat = h * r
    gy = g * w
    gh = gy * r - xhat * r * (gy * xhat).mean(-1, keepdim=True)
    return gh, (g * xhat).sum(0)


def _placements(fn, inputs, **options):
    gm = aten_graph(fn, *inputs)
    graph = lower(gm, inputs, False, for_gpu=True, **options)
    sched = schedule(graph)
    return [
        sorted(g.placements.values()) for g in sched.groups if not getattr(g, "is_extern", False)
    ]


def test_the_weight_gradients_first_stage_joins_the_row_kernel():
    inputs = [torch.randn(4096, 384), torch.randn(4096, 384), torch.randn(384)]
    groups = _placements(_rms_backward, inputs)
    with_block = [g for g in groups if "xsum" in g]
    assert len(with_block) == 1 and "reduction" in with_block[0], groups
    # the row kernel, then the 512 partials (4096 rows in blocks of 8) summed in 32 groups of
    # 16, then the groups' sums
    assert len(groups) == 3, groups


def test_many_partials_are_summed_in_groups_first():
    from danlu_inductor.lowering.reductions import regroup_count

    assert regroup_count([1024], 2048) == 64  # LLaMA's 8192 rows of 1024 in blocks of 4
    assert regroup_count([384], 512) == 32  # groups of 16 partials at least
    assert regroup_count([64], 4096) == 256
    assert regroup_count([1024], 64) == 1  # few: one kernel sums them
    assert regroup_count([65536], 1024) == 1  # enough columns to keep the programs busy


def test_the_option_off_keeps_the_long_chunks():
    inputs = [torch.randn(4096, 384), torch.randn(4096, 384), torch.randn(384)]
    groups = _placements(_rms_backward, inputs, row_block_partials=False)
    assert not any("xsum" in g for g in groups), groups
    assert validate_options({"row_block_partials": False}).row_block_partials is False


def test_a_column_sum_alone_keeps_the_long_chunks():
    """Batch-norm-like statistics: no row reduction of the same values, nothing to join."""
    inputs = [torch.randn(4096, 384)]
    groups = _placements(lambda x: (x.sum(0), (x * x).sum(0)), inputs)
    assert not any("xsum" in g for g in groups), groups


def test_the_row_block_is_the_persistent_kernels_block():
    widths = (1024, 768, 512, 384, 256, 64)
    blocks = [persistent_rows_per_program(8192, n) for n in widths]
    assert blocks == [4, 4, 8, 8, 16, 64]
    assert [heuristic_config("persistent_reduction", 8192, n).XBLOCK for n in widths] == blocks
