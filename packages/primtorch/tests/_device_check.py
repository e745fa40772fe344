"""Prims and prim decompositions on another device (``python _device_check.py cuda``).

The CPU test-suite checks; this repeats the two central ones where a GPU is available:
meta function vs reference implementation for every prim sample, and every direct
decomposition sample vs eager ATen, all on ``device``.
"""

from __future__ import annotations

import sys
import traceback

import torch
from torch.utils._pytree import tree_flatten, tree_map


def _to(device):
    def move(x):
        if isinstance(x, torch.Tensor):
            return x.to(device)
        if isinstance(x, torch.device):
            return torch.device(device)
        return x

    return move


def _layout(t):
    return [(n, s) for n, s in zip(t.shape, t.stride()) if n > 1]


def main(device: str) -> int:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _prim_samples import prim_samples
    from test_prim_decomp_direct import SAMPLES, TABLE
    from test_prims_meta import to_meta

    from danlu_primtorch.prims import PRIMS, PrimKind

    failures, checked = [], 0
    for name, info in PRIMS.items():
        for args, kwargs in prim_samples(info):
            args, kwargs = tree_map(_to(device), (args, kwargs))
            try:
                if info.kind is PrimKind.RNG:
                    kwargs = {**kwargs, "generator": None}
                ref = info.op(*args, **kwargs)
                meta = info.meta(*to_meta(args), **to_meta(kwargs))
                for r, m in zip(tree_flatten(ref)[0], tree_flatten(meta)[0], strict=True):
                    assert r.device.type == torch.device(device).type, (r.device, device)
                    assert (r.shape, r.dtype) == (m.shape, m.dtype), (r.shape, m.shape)
                    if r.numel() > 1:
                        assert _layout(r) == _layout(m), (r.stride(), m.stride())
                checked += 1
            except Exception:  # noqa: BLE001 - report every failure, keep going
                failures.append(f"prim {name}: {traceback.format_exc(limit=2)[-400:]}")
    for op, args, kwargs in SAMPLES:
        if op in {
            torch.ops.aten.empty_strided.default,
            torch.ops.aten.rand.default,
            torch.ops.aten.randn.default,
            torch.ops.aten.randint.low,
            torch.ops.aten.bernoulli.default,
            torch.ops.aten.rand.generator,
            torch.ops.aten.randn.generator,
        }:
            continue  # uninitialised or random (CUDA generators differ from the CPU sample's)
        args, kwargs = tree_map(_to(device), (args, kwargs))
        try:
            expected = op(*args, **kwargs)
        except Exception:  # noqa: BLE001 - eager itself rejects this sample on the device
            continue
        try:
            actual = TABLE[op](*args, **kwargs)
            for e, a in zip(tree_flatten(expected)[0], tree_flatten(actual)[0], strict=True):
                if isinstance(e, torch.Tensor):
                    low = e.dtype in (torch.float16, torch.bfloat16)
                    tol = {"rtol": 1e-2, "atol": 1e-2} if low else {"rtol": 1e-4, "atol": 1e-4}
                    torch.testing.assert_close(a, e, equal_nan=True, **tol)
                    if e.numel() > 1 and _layout(a) != _layout(e):
                        print(f"strides differ for {op}: {a.stride()} vs eager {e.stride()}")
            checked += 1
        except Exception:  # noqa: BLE001
            failures.append(f"decomp {op}: {traceback.format_exc(limit=2)[-400:]}")
    print(f"{device}: {checked} checks passed, {len(failures)} failed")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
