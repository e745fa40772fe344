"""Runs OpInfo samples with canonical ATen ops replaced by their prim decompositions.

``DecomposingMode`` intercepts every ATen call; one that has an entry in the table runs the
decomposition instead (prims then run their eager reference implementations). The result is
compared with plain eager on the same sample. Only pairs where a decomposition actually ran
count.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class DecomposingMode(TorchDispatchMode):
    def __init__(self, table):
        super().__init__()
        self.table = table
        self.hits: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fn = self.table.get(func)
        if fn is not None:
            out = fn(*args, **kwargs)
            if out is not NotImplemented:  # NotImplemented: not covered, keep the ATen op
                self.hits.add(func)
                return out
        return func(*args, **kwargs)


@dataclasses.dataclass
class Outcome:
    op: str
    sample: str
    hits: tuple
    ok: bool
    error: str = ""
    stride_mismatch: bool = False


# Transcendental functions: eager's vectorised CPU kernels (SLEEF) and the reference run on
# differently laid-out or converted operands may differ by a few ulp; assert_close's float32
# rtol (1.3e-6) is about 11 ulp, which is not always enough near zeros of the function.
LOOSE = {"rtol": 1e-5, "atol": 1e-5}
LOOSE_OPS = {
    "digamma",
    "lgamma",
    "polygamma",
    "erfinv",
    "special",
    "tan",
    "mvlgamma",
    "pow",
    "float_power",
    "atan2",
    "acosh",
    "asinh",
    "hypot",
}


def _check_topk(sample, expected, actual):
    """Eager leaves the order of tied indices unspecified: check indices point at the values."""
    dim = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("dim", -1)
    values, indices = actual
    if sample.input.dim():
        torch.testing.assert_close(sample.input.gather(dim, indices), values)
    assert indices.shape == expected[1].shape and indices.dtype == expected[1].dtype


UNSPECIFIED_TIES = {"topk": _check_topk}
# Uninitialised memory: only the metadata can be compared.
UNINITIALISED = {"empty_strided", "empty", "empty_like", "new_empty", "new_empty_strided"}


def _describe(sample) -> str:
    def d(x):
        if isinstance(x, torch.Tensor):
            return f"T{tuple(x.shape)}{'' if x.is_contiguous() else 'nc'}:{x.dtype}"
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(d(v) for v in x) + "]"
        return repr(x)

    return f"({d(sample.input)}, {d(list(sample.args))}, {sample.kwargs})"


def run_sample(opinfo, sample, table) -> Outcome | None:
    """None when no decomposition ran or eager itself fails on the sample."""
    fn = opinfo.op
    torch.manual_seed(0)
    try:
        expected = fn(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return None
    mode = DecomposingMode(table)
    torch.manual_seed(0)
    try:
        with mode:
            actual = fn(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:  # noqa: BLE001 - a failing decomposition is an outcome to report
        if not mode.hits:
            return None
        return Outcome(
            opinfo.name,
            _describe(sample),
            tuple(sorted(map(str, mode.hits))),
            False,
            f"{type(e).__name__}: {e}"[:300],
        )
    if not mode.hits:
        return None
    hits = tuple(sorted(map(str, mode.hits)))
    exp_flat, _ = tree_flatten(expected)
    act_flat, _ = tree_flatten(actual)
    kw = LOOSE if any(s in opinfo.name for s in LOOSE_OPS) else {}
    stride_mismatch = False
    try:
        assert len(exp_flat) == len(act_flat), "different number of outputs"
        if opinfo.name in UNSPECIFIED_TIES:
            UNSPECIFIED_TIES[opinfo.name](sample, exp_flat, act_flat)
            exp_flat, act_flat = exp_flat[:1], act_flat[:1]
        for e, a in zip(exp_flat, act_flat):
            if isinstance(e, torch.Tensor) and opinfo.name in UNINITIALISED:
                assert (a.shape, a.dtype, a.stride()) == (e.shape, e.dtype, e.stride())
                continue
            if isinstance(e, torch.Tensor):
                assert isinstance(a, torch.Tensor), f"expected a tensor, got {type(a)}"
                torch.testing.assert_close(a, e, equal_nan=True, **kw)
                sig = [(n, s) for n, s in zip(e.shape, e.stride()) if n > 1]
                sig_a = [(n, s) for n, s in zip(a.shape, a.stride()) if n > 1]
                if e.numel() > 1 and sig != sig_a:
                    stride_mismatch = True
            else:
                assert a == e or (a != a and e != e), f"{a!r} != {e!r}"
    except AssertionError as err:
        return Outcome(opinfo.name, _describe(sample), hits, False, str(err)[:300])
    return Outcome(opinfo.name, _describe(sample), hits, True, stride_mismatch=stride_mismatch)


# OpInfos reached through composite ops (their eager decomposition hits canonical ops).
EXTRA_OPINFOS = (
    "__getitem__",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.conv_transpose2d",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.pad",
    "mean",
    "std",
    "logsumexp",
    "matmul",
    "nn.functional.linear",
    "true_divide",
    "floor_divide",
    "rsub",
    "masked_fill",
    "nn.functional.relu",
    "nn.functional.silu",
    "nn.functional.gelu",
    "square",
    "flatten",
    "transpose",
    "narrow",
    "stack",
    "diagonal",
    "tril",
    "flip",
    "repeat",
    "index_add",
    "lerp",
    "addcmul",
    "clamp",
    "nn.functional.softplus",
    "count_nonzero",
    "linalg.vector_norm",
    "nn.functional.embedding",
    "take_along_dim",
    "nn.functional.one_hot",
    "cross",
    "outer",
)
DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)


def select_opinfos(table, everything=False):
    from torch.testing._internal.common_methods_invocations import op_db

    names = {str(op).split(".")[1] for op in table}
    chosen = []
    for op in op_db:
        if "sparse" in op.name:
            continue
        if (
            everything
            or op.name.split(".")[-1] in names
            or op.aten_name in names
            or (op.name in EXTRA_OPINFOS)
        ):
            chosen.append(op)
    return chosen


def _reversed_layout(t):
    """Same values, memory order of dims reversed (a dense, non-contiguous layout)."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2 or t.layout != torch.strided:
        return t
    order = list(reversed(range(t.dim())))
    return t.permute(order).contiguous().permute(order)


def sweep(table, opinfos, samples_per_dtype=3, dtypes=DTYPES, reversed_layouts=False, device="cpu"):
    """Outcomes for every (opinfo, dtype, sample, contiguous/non-contiguous) that decomposes."""
    outcomes = []
    for op in opinfos:
        for dtype in dtypes:
            if not op.supports_dtype(dtype, device):
                continue
            try:
                samples = []
                for s in op.sample_inputs(device, dtype, requires_grad=False):
                    samples.append(s)
                    if len(samples) == samples_per_dtype:
                        break
            except Exception:  # noqa: BLE001 - an OpInfo that cannot build samples here
                continue
            for s in samples:
                variants = [s]
                try:
                    variants.append(s.noncontiguous())
                    if reversed_layouts:
                        variants.append(s.transform(_reversed_layout))
                except Exception:  # noqa: BLE001 - layouts that have no non-contiguous form
                    pass
                for v in variants:
                    r = run_sample(op, v, table)
                    if r is not None:
                        outcomes.append(r)
    return outcomes


def summary(outcomes) -> str:
    ok = sum(o.ok for o in outcomes)
    lines = [
        f"prim decompositions vs eager: {ok}/{len(outcomes)} (op, sample) pairs pass "
        f"({100.0 * ok / max(len(outcomes), 1):.2f}%), "
        f"{sum(o.stride_mismatch for o in outcomes)} with other strides than eager"
    ]
    lines += [
        f"FAIL {o.op} {o.sample} via {', '.join(o.hits)}: {o.error}" for o in outcomes if not o.ok
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from danlu_primtorch.prim_decompositions import prim_decomposition_table

    tbl = prim_decomposition_table()
    dev = "cuda" if "--cuda" in sys.argv else "cpu"
    print(summary(sweep(tbl, select_opinfos(tbl, everything="--all" in sys.argv), device=dev)))
