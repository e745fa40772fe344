"""One Triton kernel for many small pointwise kernels that read only graph inputs.

A mixed-precision step casts every weight and bias it uses (GPT-2's training forward: 96 of
its 139 kernels are such casts), each a kernel of its own, a launch each. They read only the
graph's inputs, so they may all run at the first one's place. ``compose`` joins their
generated kernels into one: programs are dealt out in ranges, member i taking the next
ceil(numel_i / XBLOCK) of them, and a chain of branches on the program id runs the member's
own body with its program id made relative to its range. Each member keeps its code, names
prefixed so that the branches share nothing. The launcher sums the members' blocks for the
grid (``combo_numels`` in the kernel's meta).
"""

from __future__ import annotations

import ast


def compose(name: str, members: list) -> object | None:
    """The grouped kernel's artifact for ``members`` (TritonKernelArtifacts of 1-D pointwise
    kernels with static sizes, no bounds flag, no size arguments); None where one of them
    does not fit that (the caller then launches them one by one)."""
    from danlu_inductor.codegen.triton.backend import TritonKernelArtifact

    args, sig, params, numels, branches = [], {}, [], [], []
    offset = "0"
    for i, art in enumerate(members):
        body = _member_body(art, f"m{i}_", offset)
        if body is None:
            return None
        for p in art.signature:
            if p not in ("xnumel", "XBLOCK"):
                args.append(f"m{i}_{p}")
                sig[f"m{i}_{p}"] = art.signature[p]
        params += art.params
        numels.append(int(art.xnumel))
        blocks = f"(({int(art.xnumel)} + XBLOCK - 1) // XBLOCK)"
        end = blocks if offset == "0" else f"{offset} + {blocks}"
        branches.append((end, body))
        offset = end
    sig["xnumel"] = "i32"
    sig["XBLOCK"] = "constexpr"
    lines = [
        "@triton.jit",
        f"def {name}({', '.join(args)}, xnumel, XBLOCK: tl.constexpr):",
        "    pid = tl.program_id(0)",
    ]
    for k, (end, body) in enumerate(branches):
        lines.append(f"    {'if' if k == 0 else 'elif'} pid < {end}:")
        lines += ["        " + line for stmt in body for line in stmt.splitlines()]
    total = sum(numels)
    meta = {
        "kind": "pointwise",
        "xnumel": total,
        "rnumel": 1,
        "params": params,
        "uses_err": False,
        "signature": sig,
        "size_args": [],
        "size_hints": [],
        "numel_exprs": None,
        "combo_numels": numels,
    }
    source = "\n".join(lines) + f"\n\n\n{name}.danlu_meta = {meta!r}\n"
    return TritonKernelArtifact(name, source, params, False, "pointwise", total, 1, sig, [])


def fits(art) -> bool:
    """Can ``art``'s kernel be a member of a grouped kernel?"""
    return _member_body(art, "", "0") is not None


def _member_body(art, prefix: str, offset: str) -> list[str] | None:
    """The statements of ``art``'s kernel, its names prefixed and its program id relative
    to ``offset`` (an expression of XBLOCK); None when it does not fit a grouped kernel."""
    if art.kind != "pointwise" or art.uses_err or art.size_args:
        return None
    if int(art.xnumel) >= 2**31 or list(art.signature).count("xnumel") != 1:
        return None
    tree = ast.parse(art.source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(fns) != 1:
        return None
    fn = fns[0]
    keep = {"xnumel", "XBLOCK"}
    names = {a.arg for a in fn.args.args} - keep
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if node.id == "xnumel":
                return None  # the size read at run time: the grouped kernel has none per member
            if isinstance(node.ctx, ast.Store):
                names.add(node.id)
    if "pid" in names:
        return None
    relative = ast.parse(f"(pid - ({offset}))", mode="eval").body

    class Rewrite(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in names:
                return ast.copy_location(ast.Name(prefix + node.id, node.ctx), node)
            return node

        def visit_Call(self, node):
            self.generic_visit(node)
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr == "program_id"
                and isinstance(f.value, ast.Name)
                and f.value.id == "tl"
            ):
                if len(node.args) != 1 or not (
                    isinstance(node.args[0], ast.Constant) and node.args[0].value == 0
                ):
                    raise _NotGroupable
                return relative
            return node

    try:
        body = [Rewrite().visit(stmt) for stmt in fn.body]
    except _NotGroupable:
        return None
    return [ast.unparse(ast.fix_missing_locations(stmt)) for stmt in body]


class _NotGroupable(Exception):
    pass
