"""OpInfo sweep: check every decomposition against eager ATen on the arguments real ops see.

Each OpInfo sample runs eagerly under ``_RecordMode``. Every ATen overload the sample hits that
has a decomposition is also computed through the table (recursively, see ``run_decomposed``) on
the very same arguments, and the two results are compared. Backward ops are reached by running
the backward of samples that require grad. This needs torch's test-suite helpers
(``torch.testing._internal``, which wants ``expecttest``): install the package's ``test`` extra.

Random ops (and ops whose values are unspecified, like ``empty_like``) are compared on shape,
dtype and device only; their distributions are checked by dedicated tests.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from danlu_primtorch.canonical import CANONICAL_OPS
from danlu_primtorch.coverage.run_decomposed import run_decomposed
from danlu_primtorch.decompositions.registry import VALUES_UNSPECIFIED

SWEEP_DTYPES = (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool)
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-7)}


@dataclasses.dataclass
class Check:
    op: str
    opinfo: str
    dtype: str
    passed: bool
    message: str = ""


@dataclasses.dataclass
class SweepResult:
    checks: list[Check]
    leaks: dict[str, set[str]]  # decomposed op -> non-canonical ops its decomposition left
    ops_seen: set[str]  # every ATen overload any sample hit
    seconds: float

    def by_op(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for c in self.checks:
            n = out.setdefault(c.op, [0, 0])
            n[0] += c.passed
            n[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def compare(expected, actual, dtype_hint=None, values=True) -> str:
    """'' if ``actual`` matches ``expected`` (an eager result), else why not."""
    e_flat, e_spec = tree_flatten(expected)
    a_flat, a_spec = tree_flatten(actual)
    if len(e_flat) != len(a_flat):
        return f"structure differs: {e_spec} vs {a_spec}"
    for i, (e, a) in enumerate(zip(e_flat, a_flat)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i}: expected a tensor, got {type(a).__name__}"
            if e.shape != a.shape or e.dtype != a.dtype or e.device != a.device:
                return (
                    f"output {i}: meta differs: {tuple(e.shape)} {e.dtype} vs "
                    f"{tuple(a.shape)} {a.dtype}"
                )
            if not values:
                continue
            rtol, atol = TOLERANCE.get(e.dtype, (0.0, 0.0))
            try:
                torch.testing.assert_close(
                    a, e, rtol=rtol, atol=atol, equal_nan=True, check_stride=False
                )
            except AssertionError as err:
                return f"output {i}: " + str(err).strip().splitlines()[-3:].__str__()
        elif isinstance(e, float) and isinstance(a, float):
            if not (e == a or (math.isnan(e) and math.isnan(a))):
                return f"output {i}: {a} != {e}"
        elif e != a:
            return f"output {i}: {a!r} != {e!r}"
    return ""


class _RecordMode(TorchDispatchMode):
    """Runs ops eagerly; for each one that the table decomposes, checks the decomposition."""

    def __init__(self, table, sweep: _Sweep, opinfo: str, dtype: torch.dtype):
        super().__init__()
        self.table, self.sweep, self.opinfo, self.dtype = table, sweep, opinfo, dtype

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        self.sweep.ops_seen.add(name)
        out = func(*args, **kwargs)
        if func in self.table and self.sweep.wants(name):
            self.sweep.check(func, self.table, args, kwargs, out, self.opinfo, self.dtype)
        return out


class _Sweep:
    def __init__(self, max_checks_per_op: int):
        self.max_checks = max_checks_per_op
        self.checks: list[Check] = []
        self.counts: dict[str, int] = {}
        self.leaks: dict[str, set[str]] = {}
        self.ops_seen: set[str] = set()

    def wants(self, name: str) -> bool:
        return self.counts.get(name, 0) < self.max_checks

    def check(self, func, table, args, kwargs, expected, opinfo, dtype) -> None:
        name = str(func)
        self.counts[name] = self.counts.get(name, 0) + 1
        try:
            actual, leaves = run_decomposed(func, table, *args, **kwargs)
            if func in leaves:  # the decomposition returned NotImplemented for these arguments
                self.counts[name] -= 1
                return
            msg = compare(expected, actual, values=func not in VALUES_UNSPECIFIED)
            leak = {str(o) for o in leaves if o not in CANONICAL_OPS}
            if leak:
                self.leaks.setdefault(name, set()).update(leak)
        except Exception as e:  # a decomposition that raises is a failure, with its reason
            tb = traceback.extract_tb(e.__traceback__)
            where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
            msg = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}{where}"
        self.checks.append(Check(name, opinfo, str(dtype).replace("torch.", ""), not msg, msg))


def _samples(opinfo, dtype, samples_per_dtype: int):
    grad = (
        dtype.is_floating_point
        and opinfo.supports_autograd
        and dtype in opinfo.supported_backward_dtypes("cpu")
    )
    try:
        # the generator itself, not OpInfo.sample_inputs: that wrapper inspects the call stack
        # for test decorators on every call, which costs more than the whole check
        torch.manual_seed(0)
        it = iter(opinfo.sample_inputs_func(opinfo, "cpu", dtype, grad))
        for i in range(samples_per_dtype):
            s = next(it, None)
            if s is None:
                return
            # every other sample goes in non-contiguous (same values, strided storage)
            yield s.noncontiguous() if i % 2 == 1 else s
    except Exception:
        return


def _run_sample(opinfo, sample) -> None:
    out = opinfo(sample.input, *sample.args, **sample.kwargs)
    flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    diff = [t for t in flat if t.requires_grad and t.dtype.is_floating_point]
    if not diff:
        return
    leaves = [
        t
        for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
        if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    if not leaves:
        return
    grads = [torch.randn_like(t) for t in diff]
    torch.autograd.grad(diff, leaves, grads, allow_unused=True)


def sweep(
    table: dict[torch._ops.OpOverload, Callable],
    opinfos: Iterable | None = None,
    samples_per_dtype: int = 4,
    max_checks_per_op: int = 60,
    dtypes: Iterable[torch.dtype] = SWEEP_DTYPES,
) -> SweepResult:
    """Run OpInfo samples and check every decomposition they reach (see module docstring)."""
    if opinfos is None:
        from torch.testing._internal.common_methods_invocations import op_db

        opinfos = op_db
    start = time.perf_counter()
    state = _Sweep(max_checks_per_op)
    torch.manual_seed(0)
    for opinfo in opinfos:
        supported = opinfo.supported_dtypes("cpu")
        for dtype in dtypes:
            if dtype not in supported:
                continue
            for sample in _samples(opinfo, dtype, samples_per_dtype):
                mode = _RecordMode(
                    table,
                    state,
                    opinfo.full_name if hasattr(opinfo, "full_name") else opinfo.name,
                    dtype,
                )
                try:
                    with mode:
                        _run_sample(opinfo, sample)
                except Exception:
                    pass  # eager itself rejected the sample (error-input style); nothing to check
    return SweepResult(state.checks, state.leaks, state.ops_seen, time.perf_counter() - start)
