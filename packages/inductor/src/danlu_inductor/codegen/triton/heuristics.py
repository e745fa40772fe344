"""Launch configurations: one heuristic pick from the sizes, plus a few candidates that
the GPU autotuner times on first call."""

from __future__ import annotations

from dataclasses import dataclass


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@dataclass(frozen=True)
class Config:
    XBLOCK: int
    RBLOCK: int | None
    num_warps: int

    def kwargs(self) -> dict:
        out = {"XBLOCK": self.XBLOCK}
        if self.RBLOCK is not None:
            out["RBLOCK"] = self.RBLOCK
        return out


LONG_ROW = 16384

# Rows of at most this many elements are reduced whole in registers (a persistent reduction),
# a block of rows a program holding about PERSISTENT_BLOCK_ELEMENTS values.
PERSISTENT_MAX_RNUMEL = 1024
PERSISTENT_BLOCK_ELEMENTS = 4096


def persistent_rows_per_program(xnumel: int, rnumel: int) -> int:
    """The heuristic XBLOCK of a persistent reduction: rows a program (a power of two)."""
    rb = next_power_of_2(max(rnumel, 1))
    return max(1, min(next_power_of_2(max(xnumel, 1)), PERSISTENT_BLOCK_ELEMENTS // rb, 64))


# Reductions of rows this short (a grouped-query attention's key and value gradients sum 4
# heads) take a pointwise kernel's block: SHORT_ROW_BLOCK_ELEMENTS values a program. The row
# heuristics kept 64 rows (256 values) a program: LLaMA's two 8 x 4 x 1024 x 64 sums over 4
# heads ran 30-38 us each on the H200 (21 MB moved; torch.compile's 7-8 us), 0.49 ms a step.
SHORT_ROW = 16
SHORT_ROW_BLOCK_ELEMENTS = 2048


def short_row_block(xnumel: int, rnumel: int) -> Config | None:
    """The config of a reduction over rows of at most SHORT_ROW values (all of a row in one
    block step), or None for longer rows."""
    if rnumel > SHORT_ROW:
        return None
    rb = next_power_of_2(max(rnumel, 1))
    xb = max(1, min(next_power_of_2(max(xnumel, 1)), SHORT_ROW_BLOCK_ELEMENTS // rb))
    return Config(xb, rb, _warps(xb * rb))


def _warps(elements: int) -> int:
    return max(1, min(8, elements // 256))


def heuristic_config(kind: str, xnumel: int, rnumel: int) -> Config:
    if kind in ("persistent_reduction", "outer_reduction"):
        short = short_row_block(xnumel, rnumel)
        if short is not None:
            return short
    if kind == "pointwise":
        xb = min(1024, next_power_of_2(max(xnumel, 1)))
        return Config(xb, None, _warps(xb))
    if kind == "pointwise_2d":
        xb = min(64, next_power_of_2(max(xnumel, 1)))
        rb = min(64, next_power_of_2(max(rnumel, 1)))
        while (rnumel + rb - 1) // rb > 65535:  # grid axis 1 limit
            rb *= 2
        return Config(xb, rb, _warps(xb * rb))
    if kind == "persistent_reduction":
        rb = next_power_of_2(max(rnumel, 1))
        xb = persistent_rows_per_program(xnumel, rnumel)
        return Config(xb, rb, _warps(xb * rb))
    if kind == "outer_reduction":
        # consecutive lanes take consecutive x indices (the contiguous dim): 32 of them, each
        # stepping through R 32 at a time. The GPU suite's autotune log (H200, 192 kernels):
        # this block won 98 times; used alone it would have cost 1.4 ms over all of them,
        # (64, 16) 17.7 ms
        xb = min(32, next_power_of_2(max(xnumel, 1)))
        rb = min(32, next_power_of_2(max(rnumel, 1)))
        return Config(xb, rb, 4 if xb * rb >= 512 else 2)
    rb = min(2048, next_power_of_2(max(rnumel, 1)))
    return Config(1, rb, _warps(rb))


def _outer_second(xnumel: int) -> tuple[int, int, int]:
    """A column reduction's second candidate (the first, (32, 32, 4), is the best single
    choice). Few columns (a batch-norm gradient's partials of a small image: 4096-16384) keep
    few programs busy, and more rows a step put more loads in flight; many columns (65536)
    coalesce better with wider blocks. Channels-last batch-norm sums on an H200, L2 flushed
    (run 67, benchmarks/outer_reduction_sweep.py): at 65536 columns (64, 16, 4) 1.00 against
    (32, 32, 4) 1.11-1.19; at 8192-16384 (32, 64, 8) 1.00-1.02 against 1.05-1.24; at 4096
    (16, 64, 4) 1.00 against 1.22."""
    if xnumel >= 32768:
        return (64, 16, 4)
    if xnumel >= 8192:
        return (32, 64, 8)
    return (16, 64, 4)


def candidate_configs(kind: str, xnumel: int, rnumel: int) -> list[Config]:
    """The heuristic pick first, then variants (deduplicated, blocks within the sizes)."""
    base = heuristic_config(kind, xnumel, rnumel)
    cands = [base]
    xcap = next_power_of_2(max(xnumel, 1))
    if kind == "pointwise":
        for xb, w in ((256, 2), (512, 4), (1024, 4), (2048, 8)):
            cands.append(Config(min(xb, max(xcap, 16)), None, w))
    elif kind == "pointwise_2d":
        rcap = next_power_of_2(max(rnumel, 1))
        for xb, rb, w in ((32, 32, 4), (64, 64, 4), (16, 128, 4), (128, 16, 4), (64, 128, 8)):
            rb = max(min(rb, rcap), base.RBLOCK if (rnumel + rb - 1) // rb > 65535 else 1)
            cands.append(Config(max(1, min(xb, xcap)), rb, w))
    elif kind in ("persistent_reduction", "outer_reduction") and rnumel <= SHORT_ROW:
        # a quarter of the block, and twice it (fewer, longer programs)
        for xb, w in ((base.XBLOCK // 4, 4), (base.XBLOCK * 2, 8)):
            cands.append(Config(max(1, min(xb, xcap)), base.RBLOCK, w))
    elif kind == "persistent_reduction":
        rb = base.RBLOCK
        for xb in (1, 2, 8, 32):
            xb = max(1, min(xb, xcap))
            for w in (_warps(xb * rb), 8 if xb * rb >= 2048 else 2):
                cands.append(Config(xb, rb, w))
    elif kind == "outer_reduction":
        rcap = next_power_of_2(max(rnumel, 1))
        for xb, rb, w in (_outer_second(xnumel), (128, 8, 4), (64, 8, 8), (256, 4, 8), (16, 64, 4)):
            cands.append(Config(max(1, min(xb, xcap)), min(rb, rcap), w))
    else:
        rcap = next_power_of_2(max(rnumel, 1))
        # (32, 64): many rows per program, for reductions over a strided dim (column sums
        # in backward passes), where one row per program reads memory uncoalesced
        # rows of 16K elements and more (a language model's loss over its vocabulary): 16 warps
        # a row third (bf16 log-softmax over 4096 x 50257 on an H200: 489 us against 552 with 8)
        third = (1, 2048, 16) if rnumel >= LONG_ROW else (1, 1024, 4)
        for xb, rb, w in ((32, 64, 4), third, (1, 4096, 8), (8, 512, 4), (64, 16, 4)):
            cands.append(Config(max(1, min(xb, xcap)), min(rb, rcap), w))
    out = []
    for c in cands:
        if c not in out:
            out.append(c)
    return out
