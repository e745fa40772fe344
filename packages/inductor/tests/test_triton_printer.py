"""Triton source details that need no interpreter: index printing, configs, kernel text."""

from __future__ import annotations

import pytest
import sympy
import torch

pytest.importorskip("triton", reason="the Triton backend needs the 'triton' extra")

from danlu_inductor.codegen.triton.heuristics import (  # noqa: E402
    Config,
    candidate_configs,
    heuristic_config,
)
from danlu_inductor.codegen.triton.printer import constant, texpr  # noqa: E402
from danlu_inductor.ir.symbols import Clamp, FloorDiv, IMod, sym  # noqa: E402


def test_texpr_index_functions():
    x0, x1 = sym("x0"), sym("x1")
    assert texpr(FloorDiv(x0, 7)) == "(x0 // 7)"
    assert texpr(IMod(x1, 5)) == "(x1 % 5)"
    assert texpr(Clamp(x0 - 1, 0, 9)) == "tl.minimum(tl.maximum((-1 + x0), 0), 9)"
    assert texpr(sympy.Max(x0, x1, 3)).count("tl.maximum") == 2
    e = eval(texpr(3 * FloorDiv(x0, 4) + IMod(x0, 4)), {"x0": 23})
    assert e == 3 * (23 // 4) + 23 % 4


def test_constants_keep_special_values_and_round_reduced_floats():
    assert 'float("nan")' in constant(float("nan"), torch.float32)
    assert 'float("-inf")' in constant(float("-inf"), torch.float64)
    bf = float(torch.tensor(0.1, dtype=torch.bfloat16).float())
    assert repr(bf) in constant(0.1, torch.bfloat16)


@pytest.mark.parametrize(
    "kind,x,r",
    [
        ("pointwise", 37000, 1),
        ("pointwise_2d", 200, 77),
        ("pointwise_2d", 16, 2**24),
        ("persistent_reduction", 1000, 37),
        ("reduction", 8, 3000),
        ("reduction", 4096, 50257),
    ],
)
def test_configs_cover_the_sizes(kind, x, r):
    h = heuristic_config(kind, x, r)
    cands = candidate_configs(kind, x, r)
    assert cands[0] == h and len(set(cands)) == len(cands)
    if kind == "reduction" and r >= 16384:
        assert Config(1, 2048, 16) in cands[:3]
    if kind == "persistent_reduction":
        assert all(c.RBLOCK >= r and c.RBLOCK & (c.RBLOCK - 1) == 0 for c in cands)
    for c in cands:
        # 16 warps only for long rows (a vocabulary's), among the first three a default
        # compile builds
        assert 1 <= c.num_warps <= (16 if kind == "reduction" and r >= 16384 else 8)
        assert c.XBLOCK >= 1
        if kind == "pointwise_2d":
            assert (r + c.RBLOCK - 1) // c.RBLOCK <= 65535  # grid axis 1 limit


@pytest.mark.parametrize("kind", ["persistent_reduction", "outer_reduction"])
def test_short_rows_take_a_pointwise_sized_block(kind):
    """A reduction over 4 values a row (a grouped-query attention's key/value gradient, 2M
    rows) holds a block of about 2048 values a program in every candidate a default compile
    times, not 64 rows of 4; a row of 17 values keeps the row heuristics."""
    cands = candidate_configs(kind, 2**21, 4)
    assert cands[0].XBLOCK * cands[0].RBLOCK == 2048 and cands[0].RBLOCK == 4
    assert all(c.XBLOCK * c.RBLOCK >= 512 for c in cands[:2])
    tiny = candidate_configs(kind, 3, 4)  # three rows: one program
    assert all(c.XBLOCK <= 4 for c in tiny)
    longer = heuristic_config(kind, 2**21, 17)
    assert longer.XBLOCK * longer.RBLOCK <= 4096 and longer.RBLOCK >= 32


def test_column_reductions_second_candidate_follows_the_column_count():
    """A column reduction's two timed candidates: (32, 32, 4), then a block that suits its
    column count: taller blocks for few columns (more loads in flight in few programs), a
    wider one for many (a channels-last batch-norm sum's partials: 4096-65536)."""
    for xnumel, second in ((65536, Config(64, 16, 4)), (16384, Config(32, 64, 8))):
        cands = candidate_configs("outer_reduction", xnumel, 392)
        assert cands[:2] == [Config(32, 32, 4), second]
    small = candidate_configs("outer_reduction", 4096, 392)
    assert small[:2] == [Config(32, 32, 4), Config(16, 64, 4)]
    assert len(set(small)) == len(small)
    short_rows = candidate_configs("outer_reduction", 8192, 24)  # RBLOCK capped by the rows
    assert short_rows[1] == Config(32, 32, 8)


def _kernels_for(fn, *inputs, for_gpu=False):
    from helpers import aten_graph

    from danlu_inductor.codegen.triton.backend import TritonBackend
    from danlu_inductor.graph import GraphLowering
    from danlu_inductor.scheduler import Scheduler

    graph = GraphLowering(aten_graph(fn, *inputs), list(inputs), for_gpu=for_gpu).run()
    dtypes = {n: b.layout.dtype for n, b in graph.name_to_buffer.items() if b.layout is not None}
    groups = [g for g in Scheduler(graph).groups if not g.is_extern]
    return [TritonBackend().make_kernel(g, f"k{i}", dtypes, set()) for i, g in enumerate(groups)]


def test_index_math_is_64_bit_only_past_int32():
    # meta tensors: the kernel text needs only shapes
    big = torch.empty(3, 2**30, device="meta")
    (art,) = _kernels_for(lambda x: (x * 2).sum(0), big)
    assert "tl.program_id(0).to(tl.int64)" in art.source and ".to(tl.int64)" in art.source
    assert art.signature["xnumel"] == "i64"
    small = torch.empty(3, 2**10, device="meta")
    (art,) = _kernels_for(lambda x: (x * 2).sum(0), small)
    assert "int64" not in art.source and art.signature["xnumel"] == "i32"


def test_looped_reduction_hoists_row_values_out_of_the_loop():
    def fn(x):
        m = x.amax(-1, keepdim=True)
        return (x - torch.where(m.isinf(), 0.0, m)).exp().sum(-1)

    (art,) = _kernels_for(fn, torch.empty(4, 5000, device="meta"))
    assert art.kind == "reduction"
    loops = art.source.split("for roffset in range(")
    assert len(loops) == 5  # max, sum; each over whole blocks, then the partial last block
    # the row max's inf guard is computed between the loops, not inside the sum's
    assert "isinf" in loops[2] and not any("isinf" in part for part in loops[3:])


@pytest.mark.parametrize(
    ("for_gpu", "width", "loops"),
    [(True, 20001, 2), (False, 20001, 3), (True, 5000, 3), (True, 20000, 2)],
)
def test_long_softmax_rows_are_read_twice_on_gpu_graphs(for_gpu, width, loops):
    # GPU graphs, rows past ONLINE_MIN_ROW: the row's max and sum of exponentials in one
    # online loop, then the store; otherwise a loop each for the max, the sum and the store
    # (enough rows not to be split)
    (art,) = _kernels_for(
        lambda x: torch.softmax(x, -1), torch.empty(2048, width, device="meta"), for_gpu=for_gpu
    )
    assert art.kind == "reduction"
    assert art.source.count("for roffset in range(0, ") == loops
    # online: the block's max first (one exp a value), the row's max carried across blocks
    assert ("tl.max(smax" in art.source) == (loops == 2)
    if loops == 2:  # the row's rescale and the value's in the first loop, the store's in the
        # second; each loop written twice when its length has a ragged last block
        assert art.source.count("tl.exp(") == 3 * (2 if width % 16 else 1), art.source
    # a length 16 does not divide: each loop over whole blocks has no ragged-edge mask, the
    # partial last block keeps it
    split = loops if width % 16 else 0
    assert art.source.count("rmask = tl.full([1, RBLOCK], 1, tl.int1)") == split
    assert art.source.count(f"range(0, ({width} // RBLOCK) * RBLOCK, RBLOCK)") == split
    assert art.source.count(f"rmask = rindex < {width}\n") == loops  # a literal bound


@pytest.mark.parametrize(
    ("x", "kind"),
    [
        # bf16 rows of 20001 in a padded buffer (as a padded matmul's logits): the loop over
        # whole blocks has no mask
        (torch.empty(2048, 20008, dtype=torch.bfloat16, device="meta")[:, :20001], "reduction"),
        # rows of 1000: the mask's bound is the literal 1000, which 8 divides
        (torch.empty(8192, 1000, device="meta"), "persistent_reduction"),
    ],
)
def test_row_loads_vectorize_when_rows_are_aligned(x, kind):
    # compiled for sm_90 with the specialization Triton's JIT gives such a launch
    # (`aot_compile`: 16-byte aligned pointers, sizes 16 divides), the rows' loads take 16
    # bytes at a time; with `rindex < rnumel` (an argument 16 does not divide) in every
    # block, every load was one value
    pytest.importorskip("triton")
    from danlu_inductor.codegen.triton.backend import TritonBackend, aot_compile

    (art,) = _kernels_for(lambda x: torch.log_softmax(x, -1), x, for_gpu=True)
    assert art.kind == kind
    fns, _, _ = TritonBackend().build([art.name], [art.source])
    ptx = aot_compile(art, fns[art.name]).asm["ptx"]
    assert "ld.global.v4.b32" in ptx, "no vectorized load"


def test_build_writes_an_importable_module_and_dumps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DANLU_DEBUG_DIR", str(tmp_path / "debug"))
    from danlu_inductor.codegen.triton.backend import TritonBackend

    arts = _kernels_for(lambda x: torch.softmax(x, -1) + 1, torch.empty(6, 40, device="meta"))
    fns, path, source = TritonBackend().build([a.name for a in arts], [a.source for a in arts])
    assert path.exists() and path.read_text() == source
    (launcher,) = fns.values()
    assert launcher.kind == "persistent_reduction" and launcher.params == arts[0].params
    assert launcher.config is None  # chosen on first call
    dumped = list((tmp_path / "debug").glob("triton_kernels_*.py"))
    assert dumped and "@triton.jit" in dumped[0].read_text()
