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


def significant_strides(t: torch.Tensor):
    """Strides that matter: those of dims longer than 1 (none for empty tensors)."""
    if t.numel() == 0:
        return ()
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def compare(fake_out, real_out) -> str | None:
    fl, rl = tree_leaves(fake_out), tree_leaves(real_out)
    if len(fl) != len(rl):
        return f"{len(fl)} outputs, eager has {len(rl)}"
    for f, r in zip(fl, rl):
        if isinstance(r, torch.Tensor):
            if not isinstance(f, FakeTensor):
                return f"output is {type(f).__name__}, not a FakeTensor"
            for what, a, b in (
                ("shape", f.shape, r.shape),
                ("dtype", f.dtype, r.dtype),
                ("device", f.device, r.device),
                ("strides", significant_strides(f), significant_strides(r)),
            ):
                if a != b:
                    return f"{what} {a} != eager {b}"
            if r._is_view() and r.numel() and f.storage_offset() != r.storage_offset():
                return f"storage offset {f.storage_offset()} != eager {r.storage_offset()}"
        elif isinstance(f, torch.Tensor):
            return f"output is a tensor, eager gives {type(r).__name__}"
    return None


def run_sample(op, sample):
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
    fake_args, fake_kwargs = tree_map(
        lambda x: mode.from_real(x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
    )
    try:
        with mode:
            fake_out = op(*fake_args, **fake_kwargs)
    except DataDependentOutputError:
        return "data_dependent"
    except Exception as e:
        return f"fail: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    why = compare(fake_out, real_out)
    return "pass" if why is None else f"fail: {why}"


def sweep(ops, plan=PLAN):
    """Return (counts, failures): counts of outcomes; failures maps op name -> first reason."""
    counts = collections.Counter()
    failures = {}
    for dtype, samples_per_op in plan:
        _sweep_dtype(ops, dtype, samples_per_op, counts, failures)
    return counts, failures


def _sweep_dtype(ops, dtype, samples_per_op, counts, failures):
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
                outcome = run_sample(op, s)
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

    t0 = time.time()
    counts, failures = sweep(op_db)
    print(dict(counts), f"rate {pass_rate(counts):.4f}", f"{time.time() - t0:.1f}s")
    for name, why in sorted(failures.items()):
        print(f"  {name}: {why}")
