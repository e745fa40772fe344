"""Classify ATen ops (prim / canonical / decomposed / not handled) and summarise sweep results."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable

import torch

from danlu_primtorch.canonical import CANONICAL_OPS
from danlu_primtorch.decompositions.registry import FAMILY
from danlu_primtorch.decompositions.table import _prim_table, decomposition_table

DEFAULT_RESULTS = (
    pathlib.Path(os.environ.get("DANLU_CACHE_DIR", pathlib.Path.home() / ".cache" / "danlu"))
    / "primtorch_coverage.json"
)


def _resolve(name: str):
    """'aten.add.Tensor' -> the OpOverload, or None when this torch lacks it."""
    ns, packet, overload = name.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), packet), overload)
    except (AttributeError, RuntimeError):
        return None


def packet_name(op) -> str:
    return str(op).rsplit(".", 1)[0]


def classify(op, canonical_table=None, prim_table=None) -> str:
    canonical_table = (
        decomposition_table("canonical") if canonical_table is None else canonical_table
    )
    prim_table = _prim_table() if prim_table is None else prim_table
    if op is not None and op.namespace not in ("aten",):
        return "prim" if op.namespace == "prims" or "prim" in op.namespace else "other namespace"
    if op in CANONICAL_OPS:
        return "canonical -> prims" if op in prim_table else "canonical"
    if op in canonical_table:
        return "decomposed"
    if op._schema.is_mutable:
        # in-place and out= variants: functionalisation rewrites them to their functional op
        # before decomposition, so they are not table entries
        return "mutating (functionalize)"
    return "not handled"


def counts() -> dict[str, int]:
    """How many op packets each level covers (a packet counts once, whatever its overloads)."""
    canon = decomposition_table("canonical")
    prim = _prim_table()
    decomposed = {packet_name(o) for o in canon}
    to_prims = {packet_name(o) for o in prim}
    canonical = {packet_name(o) for o in CANONICAL_OPS}
    return {
        "packets decomposed to canonical": len(decomposed),
        "canonical packets": len(canonical),
        "canonical packets decomposed to prims": len(to_prims & canonical),
        "packets decomposed at either level": len(decomposed | to_prims),
        "overloads decomposed to canonical": len(canon),
        "canonical overloads": len(CANONICAL_OPS),
    }


def save(result, path: pathlib.Path = DEFAULT_RESULTS) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "torch": torch.__version__,
        "seconds": result.seconds,
        "by_op": result.by_op(),
        "ops_seen": sorted(result.ops_seen),
        "leaks": {k: sorted(v) for k, v in result.leaks.items()},
        "failures": [
            {"op": c.op, "opinfo": c.opinfo, "dtype": c.dtype, "message": c.message}
            for c in result.failures
        ],
    }
    path.write_text(json.dumps(data, indent=1))
    return path


def load(path: pathlib.Path = DEFAULT_RESULTS) -> dict | None:
    path = pathlib.Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def table_rows(
    results: dict | None, extra_ops: Iterable[str] = ()
) -> list[tuple[str, str, str, str]]:
    """(op, status, family, OpInfo pass/checks) for every op we know or the sweep saw."""
    canon = decomposition_table("canonical")
    prim = _prim_table()
    names = {str(o) for o in canon} | {str(o) for o in CANONICAL_OPS} | set(extra_ops)
    by_op = (results or {}).get("by_op", {})
    if results:
        names |= {n for n in results.get("ops_seen", []) if n.startswith("aten.")}
    rows = []
    for name in sorted(names):
        op = _resolve(name)
        status = classify(op, canon, prim) if op is not None else "missing in this torch"
        fam = FAMILY.get(op, "") if op is not None else ""
        p = by_op.get(name)
        rows.append((name, status, fam, f"{p[0]}/{p[1]}" if p else "-"))
    return rows


def summary(results: dict | None) -> list[str]:
    lines = [f"{k}: {v}" for k, v in counts().items()]
    if results:
        by_op = results["by_op"]
        passed = sum(p for p, _ in by_op.values())
        total = sum(n for _, n in by_op.values())
        rate = 100.0 * passed / total if total else 0.0
        lines.append(
            f"OpInfo checks of decompositions: {passed}/{total} match eager ({rate:.2f}%), "
            f"{len(by_op)} decomposed overloads exercised"
        )
        seen = [n for n in results["ops_seen"] if n.startswith("aten.")]
        status: dict[str, int] = {}
        canon, prim = decomposition_table("canonical"), _prim_table()
        for n in seen:
            o = _resolve(n)
            st = classify(o, canon, prim) if o is not None else "missing in this torch"
            status[st] = status.get(st, 0) + 1
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(status.items()))
        lines.append(f"ATen overloads reached by OpInfo samples: {len(seen)} ({parts})")
        if results.get("leaks"):
            lines.append(f"decompositions leaving non-canonical ops: {results['leaks']}")
    return lines
