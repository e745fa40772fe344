"""The capture program suite: every program runs eagerly and captured through the "eager"
backend (twice, then with another input shape) and must match bit for bit."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _programs_a  # noqa: E402
import _programs_b  # noqa: E402
from _programs_common import check_program  # noqa: E402

ALL = _programs_a.CASES + _programs_b.CASES


def test_suite_size_and_distinct_programs():
    names = [n for n, _, _ in ALL]
    assert len(ALL) >= 250
    assert len(set(names)) == len(names)
    assert len({fn.__code__ for _, fn, _ in ALL}) == len(ALL)


@pytest.mark.parametrize("name,fn,factory", ALL, ids=[c[0] for c in ALL])
def test_program(name, fn, factory):
    check_program(fn, factory)
