"""Every decomposition against eager ATen on the arguments OpInfo samples really produce.

op_db is split into shards (so ``-n 2`` spreads them); each shard runs its OpInfos' samples
(float32, float64, int64, int32, bool; every other sample non-contiguous; backward of samples
that require grad) and checks each decomposed op hit along the way. Random ops are compared on
shape/dtype only here (see test_decomp_random.py for their distributions).
"""

import warnings

import pytest

import danlu_primtorch
from danlu_primtorch.coverage.sweep import sweep

SHARDS = 8
SAMPLES_PER_DTYPE = 2
MAX_CHECKS_PER_OP = 8


@pytest.fixture(scope="module")
def op_db():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db

    return op_db


@pytest.mark.parametrize("shard", range(SHARDS))
def test_decompositions_match_eager_on_opinfo_samples(op_db, shard):
    table = danlu_primtorch.decomposition_table("canonical")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sweep(
            table,
            op_db[shard::SHARDS],
            samples_per_dtype=SAMPLES_PER_DTYPE,
            max_checks_per_op=MAX_CHECKS_PER_OP,
        )
    total = len(result.checks)
    assert total > 50, f"shard {shard} exercised only {total} decompositions"
    failures = "\n".join(f"  {c.op} [{c.opinfo}, {c.dtype}]: {c.message}" for c in result.failures)
    assert result.passed >= 0.98 * total, (
        f"{result.passed}/{total} decomposition checks match eager:\n{failures}"
    )
    # the canonical table must bottom out in canonical ops; the one documented exception is
    # native_batch_norm's in-place update of its running statistics
    leaks = {
        op: ops - {"aten.copy_.default"} if op == "aten.native_batch_norm.default" else ops
        for op, ops in result.leaks.items()
    }
    assert not {k: v for k, v in leaks.items() if v}, f"non-canonical ops left: {leaks}"
