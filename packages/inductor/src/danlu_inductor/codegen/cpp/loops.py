"""Nested C++ for loops with their OpenMP pragmas (kernel.py, vertical.py)."""

from __future__ import annotations

from danlu_inductor.codegen.cpp.printer import cexpr


def loop_nest(
    variables,
    sizes,
    body,
    parallel,
    simd_inner,
    simd_pragma=None,
    outer_pragma=None,
    starts=None,
):
    """Nested for loops; the outer ones shared by threads, the innermost one `omp simd`.
    ``starts``: each loop's first index (0 when not given); ``sizes`` are its ends."""
    if not sizes:
        return ["{"] + ["    " + b for b in body] + ["}"]
    n = len(sizes)
    lines = []
    cond = f" if({parallel})" if isinstance(parallel, str) else ""
    if outer_pragma is not None:
        lines.append(outer_pragma)
    elif parallel:
        if n == 1:
            lines.append("#pragma omp parallel for" + (" simd" if simd_inner else "") + cond)
        else:
            collapse = n - 1 if simd_inner else n
            lines.append(
                "#pragma omp parallel for"
                + (f" collapse({collapse})" if collapse > 1 else "")
                + cond
            )
    elif simd_inner and n == 1:
        lines.append(simd_pragma or "#pragma omp simd")
    indent = ""
    for d, (v, s) in enumerate(zip(variables, sizes)):
        if d == n - 1 and n > 1 and simd_inner and outer_pragma is None:
            lines.append(indent + (simd_pragma or "#pragma omp simd"))
        first = cexpr(starts[d]) if starts is not None else "0"
        lines.append(f"{indent}for (int64_t {v} = {first}; {v} < {cexpr(s)}; {v}++)")
        indent += "    "
    lines[-1] += ""
    lines.append(indent[:-4] + "{")
    lines += [indent + b for b in body]
    lines.append(indent[:-4] + "}")
    return lines
