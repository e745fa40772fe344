"""Fake tensors against eager over PyTorch's OpInfo database.

For each op in ``op_db`` and each dtype of ``fake_opinfo_sweep.TEST_PLAN``, the first samples run
in eager and on fakes; outputs must agree on shape, dtype, device, strides (of dims longer than
1) and, for views, storage offset. Ops that need data must raise DataDependentOutputError;
those count as handled, separately. One test per dtype, so ``-n 2`` spreads them. The overall
rate is reported in docs/primtorch.md (``python packages/primtorch/tests/fake_opinfo_sweep.py``).
"""

import pytest

pytest.importorskip("expecttest")

import torch  # noqa: E402
from fake_opinfo_sweep import TEST_CUDA_PLAN, TEST_PLAN, pass_rate, sweep  # noqa: E402


@pytest.mark.parametrize(
    "dtype,samples", TEST_PLAN, ids=[str(d).split(".")[1] for d, _ in TEST_PLAN]
)
def test_fake_tensor_metadata_matches_eager_over_op_db(dtype, samples):
    from torch.testing._internal.common_methods_invocations import op_db

    counts, failures = sweep(op_db, plan=((dtype, samples),))
    rate = pass_rate(counts)
    listing = "\n".join(f"  {name}: {why}" for name, why in sorted(failures.items()))
    print(f"\n{dtype}: {dict(counts)}; rate {rate:.4f}\n{listing}")
    assert counts["pass"] > 200  # the sweep really ran
    assert rate >= 0.98, f"rate {rate:.4f} < 0.98; failing ops:\n{listing}"


def test_fake_cuda_outputs_follow_inputs_over_op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    counts, failures = sweep(op_db, plan=TEST_CUDA_PLAN, device=torch.device("cuda", 0))
    rate = pass_rate(counts)
    listing = "\n".join(f"  {name}: {why}" for name, why in sorted(failures.items()))
    print(f"\nfake cuda: {dict(counts)}; rate {rate:.4f}\n{listing}")
    assert counts["pass"] > 400
    assert rate >= 0.98, f"rate {rate:.4f} < 0.98; failing ops:\n{listing}"
