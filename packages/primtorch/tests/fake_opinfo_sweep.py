"""Compare fake-tensor output metadata with eager for OpInfo samples (used by the test and
runnable alone: ``python packages/primtorch/tests/fake_opinfo_sweep.py``)."""

from __future__ import annotations

import collections
import warnings

import torch
from torch.utils._pytree import tree_leaves, tree_map

from danlu_primtorch import DataDependentOutputError, FakeTensor, FakeTensorMode

# (dtype, samples per op): float32 in depth, other dtypes where cheap.
PLAN = (
    (torch.float32, 5),
    (torch.float64, 2),
    (torch.int64, 2),
    (torch.bool, 2),
    (torch.bfloat16, 2),
    (torch.complex64, 2),
)
# Inputs moved to a fake CUDA device: outputs must land there (device propagation).
CUDA_PLAN = ((torch.float32, 2),)
# The unit test sweeps fewer samples per op (CI time); this script reports the full plans.
TEST_PLAN = tuple((dtype, 3 if dtype == torch.float32 else 1) for dtype, _ in PLAN)
TEST_CUDA_PLAN = ((torch.float32, 1),)


def significant_strides(t: torch.Tensor):
    """Strides that matter: those of dims longer than 1 (none for empty tensors)."""
    if t.numel() == 0:
        return ()
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def compare(fake_out, real_out, device=None) -> str | None:
    """Why the fake outputs disagree with eager's, or None. With ``device`` (inputs were moved
    to that fake device) outputs must be on it; strides are then not compared (eager ran on
    CPU)."""
    fl, rl = tree_leaves(fake_out), tree_leaves(real_out)
    if len(fl) != len(rl):
        return f"{len(fl)} outputs, eager has {len(rl)}"
    for f, r in zip(fl, rl):
        if isinstance(r, torch.Tensor):
            if not isinstance(f, FakeTensor):
                return f"output is {type(f).__name__}, not a FakeTensor"
            checks = [("shape", f.shape, r.shape), ("dtype", f.dtype, r.dtype)]
            if device is None:
                checks.append(("device", f.device, r.device))
                checks.append(("strides", significant_strides(f), significant_strides(r)))
            else:
                checks.append(("device", f.device, device))
            for what, a, b in checks:
                if a != b:
                    return f"{what} {a} != eager {b}"
            if (
                device is None
                and r._is_view()
                and r.numel()
                and f.storage_offset() != r.storage_offset()
            ):
                return f"storage offset {f.storage_offset()} != eager {r.storage_offset()}"
        elif isinstance(f, torch.Tensor):
            return f"output is a tensor, eager gives {type(r).__name__}"
    return None


def run_sample(op, sample, device=None):
    """'pass', 'data_dependent', 'skip' (eager rejects the sample), 'sparse_input' or
    'fail: why'."""
    args = (sample.input, *sample.args)
    kwargs = dict(sample.kwargs)
    try:
        real_out = op(*args, **kwargs)
    except Exception:
        return "skip"
    mode = FakeTensorMode()
    if any(isinstance(x, torch.Tensor) and x.layout != torch.strided for x in tree_leaves(args)):
        return "sparse_input"  # fake tensors model strided (dense) tensors only
    if device is not None and not any(isinstance(x, torch.Tensor) for x in tree_leaves(args)):
        return "skip"  # a factory: nothing to move to the device

    def fake(x):
        if not isinstance(x, torch.Tensor):
            return x
        f = mode.from_real(x)
        return f if device is None else f.to(device)

    try:
        fake_args, fake_kwargs = tree_map(fake, (args, kwargs))
        with mode:
            fake_out = op(*fake_args, **fake_kwargs)
    except DataDependentOutputError:
        return "data_dependent"
    except Exception as e:
        return f"fail: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    why = compare(fake_out, real_out, device)
    return "pass" if why is None else f"fail: {why}"


def sweep(ops, plan=PLAN, device=None):
    """Return (counts, failures): counts of outcomes; failures maps op name -> first reason.
    ``device`` (e.g. ``torch.device("cuda", 0)``): move the fake inputs there first."""
    counts = collections.Counter()
    failures = {}
    for dtype, samples_per_op in plan:
        _sweep_dtype(ops, dtype, samples_per_op, counts, failures, device)
    return counts, failures


def _sweep_dtype(ops, dtype, samples_per_op, counts, failures, device):
    for op in ops:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        try:
            samples = op.sample_inputs("cpu", dtype, requires_grad=False)
            picked = []
            for s in samples:
                picked.append(s)
                if len(picked) == samples_per_op:
                    break
        except Exception:
            continue
        for s in picked:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = run_sample(op, s, device)
            key = outcome.split(":")[0]
            counts[key] += 1
            if key == "fail":
                name = f"{op.name}.{op.variant_test_name}".rstrip(".")
                failures.setdefault(f"{name} ({dtype})", outcome)


def pass_rate(counts) -> float:
    handled = counts["pass"] + counts["data_dependent"]
    total = handled + counts["fail"]
    return handled / total if total else 0.0


if __name__ == "__main__":
    import time

    from torch.testing._internal.common_methods_invocations import op_db

    for label, plan, device in (
        ("cpu", PLAN, None),
        ("fake cuda", CUDA_PLAN, torch.device("cuda", 0)),
    ):
        t0 = time.time()
        counts, failures = sweep(op_db, plan, device)
        rate = pass_rate(counts)
        print(f"{label}: {dict(counts)} rate {rate:.4f} ({time.time() - t0:.1f}s)")
        for name, why in sorted(failures.items()):
            print(f"  {name}: {why}")
