"""Code made by the bytecode layer satisfies the frame hook's contract on every version."""

import pytest
from hook_support import clean_state, run_in_region

from danlu_dynamo import bytecode
from danlu_dynamo import eval_frame as ef


@pytest.fixture(autouse=True)
def _clean():
    clean_state()
    yield
    clean_state()


def rebuilt(fn, edit=None):
    instructions = bytecode.disassemble(fn.__code__)
    if edit is not None:
        edit(instructions)
    return bytecode.assemble(instructions, template=fn.__code__)


def compile_with(fn, code):
    def callback(frame, cache_size):
        if frame.f_code is fn.__code__:
            return ef.GuardedCode(code, lambda L: True)
        return None

    return callback


def add_one(x):
    return x + 1


def closure_and_cells(a, /, b=2, *rest, c, **kw):
    scale = 3

    def inner(v):
        return v * scale + a

    return [inner(v) for v in (b, *rest, c, *kw.values())]


def test_round_tripped_code_runs_in_place_of_the_original():
    code = rebuilt(closure_and_cells)
    assert code is not closure_and_cells.__code__
    ef.check_transformed_code(closure_and_cells.__code__, code)
    args, kwargs = (1, 5, 6, 7), {"c": 8, "z": 9}
    expected = closure_and_cells(*args, **kwargs)
    assert (
        run_in_region(compile_with(closure_and_cells, code), closure_and_cells, *args, **kwargs)
        == expected
    )
    assert ef.stats()["compiles"] >= 1 and len(ef.cache_entries(closure_and_cells.__code__)) == 1


def test_edited_code_is_what_runs():
    def plus_two(instructions):
        (const,) = [i for i in instructions if i.opname == "LOAD_CONST" and i.argval == 1]
        const.argval = 2

    code = rebuilt(add_one, plus_two)
    assert run_in_region(compile_with(add_one, code), add_one, 40) == 42
    assert add_one(40) == 41
