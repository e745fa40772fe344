"""The order a pointwise kernel walks its dims in: the memory order of what it stores.

A pointwise kernel whose output is laid out channels-last (a value eager keeps in the layout
of the convolution that made it) walks its logical dims (N, C, H, W); walked in that order
with W innermost, every store and load jumps by C elements. Sorting the dims by the stride
the first stored buffer has along them (largest first) makes the innermost loop (C++) or the
consecutive threads (Triton) touch consecutive addresses. Both code generators use it.
"""

from __future__ import annotations

import sympy

from danlu_inductor.ir.symbols import is_static, unit_stride


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


def reads_along_x(group, xsizes) -> bool:
    """Whether a reduction group's reads run contiguously along its innermost x dim and with a
    stride along the reduction dims: per-channel statistics of a channels-last activation,
    column sums of a row-major matrix. Such a reduction coalesces only when consecutive lanes
    take consecutive x indices (wide XBLOCK, short RBLOCK); the usual rows-of-R block has
    each lane jump by the row length. Decided by the majority of the reads that move with R."""
    loop = list(zip([*group.xvars, *group.rvars], [*xsizes, *group.rsizes]))
    moving_x = [v for v, s in zip(group.xvars, xsizes) if not is_static(s) or int(s) > 1]
    rvars = [v for v, s in zip(group.rvars, group.rsizes) if not is_static(s) or int(s) > 1]
    if not moving_x or not rvars:
        return False
    inner = moving_x[-1]
    along_x = along_r = 0
    for node in group.nodes:
        for _, e, indirect in group.reads_in_kernel(node):
            e = sympy.sympify(e)
            if indirect or not any(e.has(r) for r in rvars):
                continue
            if any(unit_stride(e, r, loop) for r in rvars):
                along_r += 1
            elif unit_stride(e, inner, loop):
                along_x += 1
    return along_x > along_r
