"""The capture program suite again with ``dynamic=True``: every input size symbolic from the
first trace, two shape variants, bit-for-bit against eager; no symbolic trace may need the
static fallback, and the same programs (only) break the graph."""

import functools
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _programs_a  # noqa: E402
import _programs_b  # noqa: E402
import _programs_common  # noqa: E402
from test_capture_programs import EXPECTED_BREAKS  # noqa: E402

import danlu_dynamo  # noqa: E402

ALL = _programs_a.CASES + _programs_b.CASES


class _Dynamic:
    """``danlu_dynamo`` as check_program sees it, with ``optimize(dynamic=True)``. (Looked up
    at call time: importing the optimizer at collection would set the C cache limit before
    the no_torch hook tests lower it.)"""

    @staticmethod
    def optimize(*args, **kwargs):
        return functools.partial(danlu_dynamo.optimize, dynamic=True)(*args, **kwargs)


@pytest.mark.parametrize("name,fn,factory", ALL, ids=[c[0] for c in ALL])
def test_program_with_dynamic_true(name, fn, factory, monkeypatch, caplog):
    monkeypatch.setattr(_programs_common, "danlu_dynamo", _Dynamic)
    with caplog.at_level(logging.INFO, logger="danlu_dynamo"):
        opt = _programs_common.check_program(fn, factory, variants=(0, 1, 0))
    fallbacks = [r.getMessage() for r in caplog.records if "static sizes" in r.getMessage()]
    assert not fallbacks, fallbacks
    assert bool(opt._capture_ctx.breaks) == (name in EXPECTED_BREAKS)
