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


def _step(expr, var, variables) -> int | None:
    """How far ``expr`` moves when ``var`` goes 0 -> 1 with every other variable at 0 (the
    stride at the origin; floor divisions and remainders make it exact only there, which is
    all the layout question below needs)."""
    expr = sympy.sympify(expr)
    at0 = {v: sympy.Integer(0) for v in variables}
    try:
        d = sympy.sympify(expr.xreplace({**at0, var: sympy.Integer(1)}) - expr.xreplace(at0))
    except (TypeError, ValueError):
        return None
    return int(d) if d.is_Integer else None


def reads_along_x(group, xvars, xsizes) -> bool:
    """Whether a reduction group's reads run contiguously along its innermost x dim and with a
    stride along the reduction dims: per-channel statistics of a channels-last activation,
    column sums of a row-major matrix. Such a reduction coalesces only when consecutive lanes
    take consecutive x indices (wide XBLOCK, short RBLOCK); the usual rows-of-R block has
    each lane jump by the row length. Decided by the majority of the reads that move with R."""
    moving_x = [v for v, s in zip(xvars, xsizes) if not is_static(s) or int(s) > 1]
    rvars = [v for v, s in zip(group.rvars, group.rsizes) if not is_static(s) or int(s) > 1]
    if not moving_x or not rvars:
        return False
    inner = moving_x[-1]
    variables = list(group.xvars) + list(group.rvars)
    along_x = along_r = 0
    for node in group.nodes:
        for _, e, indirect in group.reads_in_kernel(node):
            if indirect or not any(e.has(r) for r in rvars):
                continue
            if any(_step(e, r, variables) == 1 for r in rvars):
                along_r += 1
            elif _step(e, inner, variables) == 1:
                along_x += 1
    return along_x > along_r
