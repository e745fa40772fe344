"""Canonical -> prims decompositions against eager ATen on OpInfo samples.

float32, float64, int64 and bool where the OpInfo supports them; each sample also in its
non-contiguous form and with its dims' memory order reversed. Rerun by hand for the numbers: ``python tests/_decomp_harness.py``
(``--all`` sweeps the whole op_db, ~2 minutes).
"""

from __future__ import annotations

import pytest
import torch
from _decomp_harness import select_opinfos, summary, sweep

from danlu_primtorch.prim_decompositions import prim_decomposition_table

TABLE = prim_decomposition_table()


@pytest.fixture(scope="module")
def outcomes():
    # two samples per dtype, each contiguous, non-contiguous and with reversed memory order
    return sweep(TABLE, select_opinfos(TABLE), samples_per_dtype=2, reversed_layouts=True)


def test_pass_rate_at_least_98_percent(outcomes):
    report = summary(outcomes)
    print(report)
    assert len(outcomes) > 1000, "the sweep exercised too few samples to mean anything"
    passed = sum(o.ok for o in outcomes)
    assert passed / len(outcomes) >= 0.98, report


def test_sweep_covers_dtypes_and_layouts(outcomes):
    text = " ".join(o.sample for o in outcomes)
    for dtype in ("torch.float32", "torch.float64", "torch.int64", "torch.bool"):
        assert dtype in text, dtype
    assert "nc:" in text  # non-contiguous inputs took part


def test_most_decompositions_are_reached_by_opinfos(outcomes):
    hit = {h for o in outcomes for h in o.hits}
    assert len(hit) >= 0.85 * len(TABLE), sorted(str(k) for k in TABLE if str(k) not in hit)


def test_decomposed_results_are_not_eager_in_disguise(outcomes):
    # the mode really replaced ops: every counted outcome names the decompositions that ran
    assert all(o.hits for o in outcomes)
    assert any("aten.add.Tensor" in o.hits for o in outcomes)
    assert torch.ops.aten.add.Tensor in TABLE


def test_harness_detects_a_wrong_decomposition():
    from torch.testing._internal.common_methods_invocations import op_db

    wrong = dict(TABLE)
    wrong[torch.ops.aten.add.Tensor] = TABLE[torch.ops.aten.sub.Tensor]
    add_opinfo = [op for op in op_db if op.name == "add"]
    results = sweep(wrong, add_opinfo, samples_per_dtype=2)
    assert results and not all(o.ok for o in results)


def test_low_precision_small_ints_and_complex():
    # bfloat16 computed in float32 and rounded once; int8 promotion; complex operands keep
    # the ATen op (only the real parts of such programs decompose)
    dtypes = (torch.bfloat16, torch.int8, torch.complex64)
    results = sweep(TABLE, select_opinfos(TABLE), samples_per_dtype=1, dtypes=dtypes)
    report = summary(results)
    print(report)
    assert len(results) > 200
    assert sum(o.ok for o in results) / len(results) >= 0.98, report
