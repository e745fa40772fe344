"""Pad 16-bit matrix multiplies whose sizes break the library's 16-byte alignment.

cuBLAS picks much slower kernels when a row of an operand or of the result is not a multiple
of 16 bytes (8 bf16/fp16 elements): GPT-2's vocabulary of 50257 makes its language-model head
run an "align1" kernel about 7x slower than an aligned one of the same size. This pass
rewrites ``mm``/``addmm``/``bmm`` on such sizes into zero-padded operands (the padding fuses
into the kernels that produce them, or costs one copy of an input), the library call on
aligned sizes, and a slice of the result. The products are unchanged: padded rows of K
multiply zeros, padded columns of N are sliced away. A graph output that is such a slice is
returned as it is, its rows padded to 16 bytes (``padded_row_strides``), as torch.compile returns
GPT-2's logits: copying it into eager's layout cost 0.46 ms a call on the H200.

Writing the product of unpadded operands into a buffer with padded rows (``mm.out``) does not
make cuBLAS take the aligned kernel when N itself is misaligned (3.41 ms against 0.46 ms
padded, H200, `benchmarks/gpu_matmul_alignment.py`), so the operands are padded.
"""

from __future__ import annotations

import torch

from danlu_inductor.ir.symbols import contiguous_strides

aten = torch.ops.aten

ALIGN = 8  # elements of a 16-bit dtype in 16 bytes
MIN_FLOPS = 1 << 27  # below this the copies cost more than the slower kernel
_MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default)


def padded_row_strides(shape) -> list:
    """Row-major strides of ``shape`` with the last dimension's rows rounded up to ALIGN
    elements (16 bytes of a 16-bit dtype)."""
    return contiguous_strides([*shape[:-1], -(-shape[-1] // ALIGN) * ALIGN])


def _meta(v):
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    return v


def _new(graph, target, args, kwargs=None):
    node = graph.call_function(target, args, kwargs or {})
    metas = torch.fx.node.map_arg((args, kwargs or {}), lambda a: _meta(a.meta["val"]))
    node.meta["val"] = target(*metas[0], **metas[1])
    return node


def _static(t) -> bool:
    return all(isinstance(s, int) for s in t.shape)


def _col_major(v) -> bool:
    """A transposed view (a weight as `w.t()`, a gradient as `g.t()`): its rows are strided."""
    return v.stride(-2) == 1 and v.stride(-1) != 1 and v.shape[-1] > 1 and v.shape[-2] > 1


def _swap(v) -> list[int]:
    return list(range(v.dim() - 2)) + [v.dim() - 1, v.dim() - 2]


def _unswapped(node, swap):
    """The tensor `node` transposes (its last two dims), if it is such a view, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    if node.target is aten.permute.default and list(node.args[1]) == swap:
        return node.args[0]
    if node.target is aten.t.default:
        return node.args[0]
    if node.target is aten.transpose.int:
        dims = {d % len(swap) for d in node.args[1:3]}
        if dims == {len(swap) - 2, len(swap) - 1}:
            return node.args[0]
    return None


class _Padder:
    """Zero-padded operands, made once per (tensor, padding): the gradient of a language-model
    head feeds two padded matmuls (the input's and the weight's gradient), which must read one
    padded copy, not two."""

    def __init__(self, graph):
        self.graph, self.made = graph, {}

    def pad(self, x, rows: int, cols: int):
        """`x` with `rows` zero rows and `cols` zero columns added to its last two dims. A
        transposed view is padded as it is stored and transposed back, so that the copy reads
        and writes along memory and the operand stays transposed (the library reads it so)."""
        if not (rows or cols):
            return x
        v = x.meta["val"]
        if not _col_major(v):
            return self._pad(x, [0, cols, 0, rows])
        swap = _swap(v)
        inner = _unswapped(x, swap) or self._new(aten.permute.default, (x, swap))
        return self._new(aten.permute.default, (self._pad(inner, [0, rows, 0, cols]), swap))

    def _pad(self, x, pads):
        while len(pads) > 2 and pads[-2:] == [0, 0]:
            pads = pads[:-2]  # one spelling per padding, so equal paddings are one node
        return self._new(aten.constant_pad_nd.default, (x, pads))

    def _new(self, target, args):
        key = (target, args[0], tuple(args[1]))
        if key not in self.made:
            self.made[key] = _new(self.graph, target, args)
        return self.made[key]


def _split_columns(graph, target, bias, a, b, m: int, n: int, val):
    """``a @ b`` (+ bias) whose only misaligned size is N, with ``b`` read transposed (a
    weight ``w.t()``: its rows are K, aligned), as two library calls writing into one buffer
    whose rows are N rounded up to 16 bytes: the first N - N % 8 columns (aligned N, aligned
    row stride: the fast kernel), then the last few (a matrix-vector product). No operand is
    copied: padding ``w`` instead copied all of it on every call (GPT-2's head: 77 MB, 0.23
    ms on the H200). Returns the node of the result: a slice with padded rows."""
    n_al, n_pad = n - n % ALIGN, n - n % ALIGN + ALIGN
    out_target = aten.mm.out if target is aten.mm.default else aten.addmm.out
    buf = graph.call_function(
        aten.empty_strided.default,
        ([m, n_pad], [n_pad, 1]),
        {"dtype": val.dtype, "device": val.device},
    )
    buf.meta["val"] = torch.empty_strided([m, n_pad], [n_pad, 1], dtype=val.dtype, device="meta")
    for lo, hi in ((0, n_al), (n_al, n)):
        cols = _new(graph, aten.slice.Tensor, (b, 1, lo, hi))
        dst = _new(graph, aten.slice.Tensor, (buf, 1, lo, hi))
        if bias is None:
            _new(graph, out_target, (a, cols), {"out": dst})
        else:
            part = _new(graph, aten.slice.Tensor, (bias, -1, lo, hi))
            _new(graph, out_target, (part, a, cols), {"out": dst})
    out = _new(graph, aten.slice.Tensor, (buf, 1, 0, n))
    out.meta["val"] = val  # the product's description; returned, it keeps its padded rows
    return out


def pad_matmuls(gm: torch.fx.GraphModule, split_columns: bool = False) -> int:
    """Pad the misaligned 16-bit matmuls of ``gm`` in place; returns how many were padded.
    ``split_columns``: a 2-D product misaligned in N only, its right operand read transposed,
    is computed by ``_split_columns`` instead (no operand copied)."""
    graph, count = gm.graph, 0
    padder = _Padder(graph)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _MATMULS:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.bfloat16, torch.float16):
            continue
        bias, a, b = node.args if node.target is aten.addmm.default else (None, *node.args[:2])
        av, bv = a.meta.get("val"), b.meta.get("val")
        if not all(isinstance(t, torch.Tensor) and _static(t) for t in (av, bv, val)):
            continue
        m, k = av.shape[-2], av.shape[-1]
        n = bv.shape[-1]
        pad_k, pad_n = -k % ALIGN, -n % ALIGN
        # a column-major left operand (a transposed view: weight gradients) has rows of m
        pad_m = -m % ALIGN if _col_major(av) else 0
        batch = av.shape[0] if av.dim() == 3 else 1
        if not (pad_k or pad_n or pad_m) or 2 * batch * m * n * k < MIN_FLOPS:
            continue
        if node.kwargs or (bias is not None and not isinstance(bias, torch.fx.Node)):
            continue  # addmm with beta/alpha: leave it
        if (
            split_columns
            and pad_n
            and not (pad_k or pad_m)
            and av.dim() == 2
            and n > ALIGN
            and _col_major(bv)
            and (bias is None or bias.meta["val"].shape[-1] == n)
        ):
            with graph.inserting_before(node):
                out = _split_columns(graph, node.target, bias, a, b, m, n, val)
            node.replace_all_uses_with(out)
            graph.erase_node(node)
            count += 1
            continue
        with graph.inserting_before(node):  # a pad made for an earlier matmul is reused
            a = padder.pad(a, pad_m, pad_k)
            b = padder.pad(b, pad_k, pad_n)
            if bias is not None and (pad_n or pad_m):
                bv_shape = bias.meta["val"].shape
                pads = [0, pad_n if bv_shape[-1] == n else 0]
                if len(bv_shape) >= 2:
                    pads += [0, pad_m if bv_shape[-2] == m else 0]
                if any(pads):
                    bias = _new(graph, aten.constant_pad_nd.default, (bias, pads))
            args = (a, b) if bias is None else (bias, a, b)
            out = _new(graph, node.target, args)
            if pad_m:
                out = _new(graph, aten.slice.Tensor, (out, val.dim() - 2, 0, m))
            if pad_n:
                out = _new(graph, aten.slice.Tensor, (out, val.dim() - 1, 0, n))
            if pad_m or pad_n:
                # the slice stands for the product: a graph output keeps the product's
                # strides (the lowering realizes outputs with their value's strides)
                out.meta["val"] = val
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        count += 1
    if count:
        graph.lint()
        gm.recompile()
    return count
