"""Fake tensors with symbolic sizes against eager over OpInfo samples.

For each sample, the first dim of every tensor argument longer than 1 becomes symbolic (duck
sizing: equal sizes share a symbol). The op runs on those fakes; its output sizes and strides,
evaluated at the example sizes (without guarding), must be eager's. Outcomes:

- ``pass``: metadata right, no size symbol specialised to a constant;
- ``specialized``: metadata right, but the op guarded a symbol to one value (the result would
  be reused only for that size: correct, not dynamic);
- ``data_dependent``: DataDependentOutputError, as designed;
- ``fail: why``.

Run alone: ``python packages/primtorch/tests/symbolic_opinfo_sweep.py [samples per op]``.
"""

from __future__ import annotations

import collections
import sys
import warnings

import torch
from torch.utils._pytree import tree_leaves, tree_map

from danlu_primtorch import DataDependentOutputError, FakeTensor, FakeTensorMode
from danlu_primtorch.symbolic import ShapeEnv, sym_expr


def _value(env, x):
    return env.hint_of(sym_expr(x)) if isinstance(x, torch.SymInt) else x


def compare(env, fake_out, real_out) -> str | None:
    fl, rl = tree_leaves(fake_out), tree_leaves(real_out)
    if len(fl) != len(rl):
        return f"{len(fl)} outputs, eager has {len(rl)}"
    for f, r in zip(fl, rl):
        if isinstance(r, torch.Tensor):
            if not isinstance(f, FakeTensor):
                return f"output is {type(f).__name__}, not a FakeTensor"
            shape = tuple(_value(env, s) for s in f.shape)
            if shape != tuple(r.shape):
                return f"shape {shape} != eager {tuple(r.shape)}"
            if f.dtype != r.dtype:
                return f"dtype {f.dtype} != eager {r.dtype}"
            if r.numel() > 1:
                strides = [_value(env, s) for s in f.stride()]
                got = [s for s, n in zip(strides, r.shape) if n > 1]
                want = [s for s, n in zip(r.stride(), r.shape) if n > 1]
                if got != want:
                    return f"strides {got} != eager {want}"
    return None


def run_sample(op, sample) -> str:
    args = (sample.input, *sample.args)
    kwargs = dict(sample.kwargs)
    if any(isinstance(x, torch.Tensor) and x.layout != torch.strided for x in tree_leaves(args)):
        return "skip"
    if not any(
        isinstance(x, torch.Tensor) and x.dim() and x.shape[0] > 1 for x in tree_leaves(args)
    ):
        return "skip"  # nothing to make symbolic
    try:
        real_out = op(*args, **kwargs)
    except Exception:
        return "skip"
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    counter = iter(range(1000))

    def fake(x):
        if not isinstance(x, torch.Tensor):
            return x
        dims = [0] if x.dim() and x.shape[0] > 1 else None
        return mode.from_real(x, dynamic_dims=dims, source=f"a{next(counter)}")

    try:
        fake_args, fake_kwargs = tree_map(fake, (args, kwargs))
        with mode:
            fake_out = op(*fake_args, **fake_kwargs)
    except DataDependentOutputError:
        return "data_dependent"
    except Exception as e:
        msg = str(e).splitlines()[0][:140] if str(e) else ""
        return f"fail: {type(e).__name__}: {msg}"
    why = compare(env, fake_out, real_out)
    if why is not None:
        return f"fail: {why}"
    if any(v.is_number for v in env.replacements.values()):
        return "specialized"
    return "pass"


def sweep(ops, dtype=torch.float32, samples_per_op=2):
    counts = collections.Counter()
    failures = {}
    specialized = []
    for op in ops:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        try:
            picked = []
            for s in op.sample_inputs("cpu", dtype, requires_grad=False):
                picked.append(s)
                if len(picked) == samples_per_op:
                    break
        except Exception:
            continue
        name = f"{op.name}.{op.variant_test_name}".rstrip(".")
        for s in picked:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = run_sample(op, s)
            key = outcome.split(":")[0]
            counts[key] += 1
            if key == "fail":
                failures.setdefault(name, outcome)
            elif key == "specialized" and name not in specialized:
                specialized.append(name)
    return counts, failures, specialized


def rates(counts) -> tuple[float, float]:
    """(handled, dynamic): handled = pass + specialized + data_dependent over all run;
    dynamic = pass over all run."""
    total = sum(v for k, v in counts.items() if k != "skip")
    if not total:
        return 0.0, 0.0
    handled = counts["pass"] + counts["specialized"] + counts["data_dependent"]
    return handled / total, counts["pass"] / total


if __name__ == "__main__":
    import time

    from torch.testing._internal.common_methods_invocations import op_db

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    t0 = time.time()
    counts, failures, specialized = sweep(op_db, torch.float32, n)
    handled, dynamic = rates(counts)
    print(f"{dict(counts)} handled {handled:.4f} dynamic {dynamic:.4f} ({time.time() - t0:.0f}s)")
    print("failures:")
    for name, why in sorted(failures.items()):
        print(f"  {name}: {why}")
    print("specialized:", ", ".join(specialized))
