"""Fake tensors with symbolic sizes over PyTorch's OpInfo database (first float32 sample of
every third op, to stay within CI time; first dim of every tensor argument symbolic): output
sizes and strides at the example sizes must be eager's. The numbers for every op are in
docs/primtorch.md: ``python packages/primtorch/tests/symbolic_opinfo_sweep.py [samples]``."""

import pytest

pytest.importorskip("expecttest")

import torch  # noqa: E402
from symbolic_opinfo_sweep import rates, sweep  # noqa: E402


def test_symbolic_fake_metadata_matches_eager_over_op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    counts, failures, specialized = sweep(op_db[::3], torch.float32, 1)
    handled, dynamic = rates(counts)
    listing = "\n".join(f"  {name}: {why}" for name, why in sorted(failures.items()))
    print(f"\n{dict(counts)}; handled {handled:.4f}, dynamic {dynamic:.4f}\n{listing}")
    assert counts["pass"] > 80  # the sweep really ran, mostly without specialising
    assert handled >= 0.97, f"handled {handled:.4f} < 0.97; failing ops:\n{listing}"
    assert dynamic >= 0.70, f"only {dynamic:.4f} of samples stay symbolic"
