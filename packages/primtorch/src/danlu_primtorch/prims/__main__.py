"""``python -m danlu_primtorch.prims``: print the prim set (Markdown table and counts)."""

from collections import Counter

from danlu_primtorch.prims import PRIMS
from danlu_primtorch.prims.registry import format_prim_table

print(format_prim_table())
counts = Counter(p.kind.value for p in PRIMS.values())
print(f"\n{len(PRIMS)} prims: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
