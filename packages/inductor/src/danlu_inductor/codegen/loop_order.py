"""The order a pointwise kernel walks its dims in: the memory order of what it stores.

A pointwise kernel whose output is laid out channels-last (a value eager keeps in the layout
of the convolution that made it) walks its logical dims (N, C, H, W); walked in that order
with W innermost, every store and load jumps by C elements. Sorting the dims by the stride
the first stored buffer has along them (largest first) makes the innermost loop (C++) or the
consecutive threads (Triton) touch consecutive addresses. Both code generators use it.
"""

from __future__ import annotations

import sympy

from danlu_inductor.ir.symbols import is_static


def memory_order(group, xsizes, local_buffers) -> list[int]:
    """Indices of ``group``'s x dims, outermost first. Logical order when a size is symbolic,
    no buffer is stored, or the store is not a plain strided one."""
    n = len(xsizes)
    logical = list(range(n))
    if n < 2 or not all(is_static(s) for s in xsizes):
        return logical
    for node in group.nodes:
        if node.name in local_buffers:
            continue
        e = sympy.expand(group.write_in_kernel(node))
        coeffs = []
        for v in group.xvars:
            c = sympy.diff(e, v)
            if not c.is_Integer or c < 0:
                return logical
            coeffs.append(int(c))
        moving = [k for k in logical if xsizes[k] > 1]
        if len(set(coeffs[k] for k in moving)) != len(moving):
            return logical
        return sorted(logical, key=lambda k: (-coeffs[k] if k in moving else 0, k))
    return logical
