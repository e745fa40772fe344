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

# Programs that still break the graph (correct through the fallback), and why:
EXPECTED_BREAKS = {
    # collections.namedtuple() builds a class at run time (exec + sys.intern): not traced
    "namedtuple_make",
    # class statements inside the captured function are not traced
    "super_call",
}


def test_suite_size_and_distinct_programs():
    names = [n for n, _, _ in ALL]
    assert len(ALL) >= 250
    assert len(set(names)) == len(names)
    assert len({fn.__code__ for _, fn, _ in ALL}) == len(ALL)


@pytest.mark.parametrize("name,fn,factory", ALL, ids=[c[0] for c in ALL])
def test_program(name, fn, factory):
    opt = check_program(fn, factory)
    ctx = opt._capture_ctx
    if name in EXPECTED_BREAKS:
        assert ctx.breaks, "expected a graph break; update EXPECTED_BREAKS"
    else:
        assert not ctx.breaks and not ctx.eager_reasons, (
            [str(b) for b in ctx.breaks],
            ctx.eager_reasons,
        )
        assert any(s.num_ops > 0 for s in ctx.records) or name in NO_OPS


# Programs whose captured frame has no tensor op at all (pure Python around its inputs).
NO_OPS = {
    "method_contiguous_noop",
    "ternary",
    "dataclass_returned",
    "mutate_arg_dict",
    "object_arg_setattr",
}
