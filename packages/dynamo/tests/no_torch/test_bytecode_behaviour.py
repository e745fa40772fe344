"""Functions keep their behaviour after a round trip and after edits (NOPs, shifted tables)."""

from __future__ import annotations

import functools
import types

import pytest
from bytecode_edit_helpers import pad_with_nops, shuffle_blocks, transform_code

from danlu_dynamo.bytecode import assemble, disassemble

# -- sample functions: control flow the exception table and jump encoding must get right -------


def loops_and_branches(n):
    out = []
    i = 0
    while i < n:
        if i % 3 == 0:
            out.append(i)
        elif i % 3 == 1:
            i += 1
            continue
        else:
            for j in range(i):
                if j > 4:
                    break
                out.append(-j)
            else:
                out.append(None)
        i += 1
    return out


def try_except_finally(values):
    log = []
    for v in values:
        try:
            try:
                log.append(10 // v)
            except ZeroDivisionError as e:
                log.append(type(e).__name__)
                if v == 0 and len(log) > 3:
                    raise ValueError("late zero") from e
            finally:
                log.append("f")
        except ValueError as e:
            log.append(str(e))
        except TypeError:
            log.append("type")
            continue
    return log


class _Ctx:
    def __init__(self, log, swallow):
        self.log, self.swallow = log, swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind.__name__ if kind else None))
        return self.swallow


def with_blocks(x):
    log = []
    with _Ctx(log, swallow=True):
        with _Ctx(log, swallow=False) as c:
            log.append(c.swallow)
            if x < 0:
                raise KeyError(x)
        log.append("inner done")
    try:
        with _Ctx(log, swallow=False):
            return log, 1 / x
    except ZeroDivisionError:
        return log, "zero"


def closures_and_comprehensions(n):
    scale = n + 1

    def mul(v):
        return v * scale

    squares = [mul(i) ** 2 for i in range(n) if i % 2]
    table = {k: [mul(v) for v in range(k)] for k in range(n)}
    gen = sum(x for x in squares if x > 3)
    nonlocal_counter = 0

    def bump():
        nonlocal nonlocal_counter
        nonlocal_counter += scale

    for _ in range(n):
        bump()
    return squares, table, gen, nonlocal_counter, functools.reduce(lambda a, b: a - b, squares, 0)


def generator_pipeline(n):
    def produce():
        for i in range(n):
            got = yield i
            if got:
                yield from range(got)

    g = produce()
    out = [next(g)]
    out.append(g.send(2))
    out.extend(g)
    return out


def many_locals_and_kwargs(a, b=2, *args, c, d=4, **kw):
    v0, v1, v2, v3, v4, v5, v6, v7, v8, v9 = range(10)
    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9 = range(10, 20)
    x = a + b + c + d + sum(args) + sum(kw.values())
    return x + v0 + v9 + w0 + w9 + (v1 * w1 if x > 3 else v2 - w2) + v3 + w3 + v4 + w4 + v8 + w8


def match_statement(cmd):
    match cmd:
        case {"go": direction} if direction in ("n", "s"):
            return f"go {direction}"
        case [first, *rest]:
            return (first, len(rest))
        case str() as s:
            return s.upper()
        case _:
            return None


SAMPLES = [
    (loops_and_branches, [(0,), (7,), (20,)]),
    (try_except_finally, [([1, 2, 0, "x", 5],), ([0, 1, 1, 0, 3],), ([],)]),
    (with_blocks, [(2,), (-1,), (0,)]),
    (closures_and_comprehensions, [(0,), (5,)]),
    (generator_pipeline, [(4,)]),
    (match_statement, [({"go": "n"},), ([1, 2, 3],), ("hi",), (3.5,)]),
]


def _outcome(fn, args, kwargs=None):
    try:
        return ("ok", fn(*args, **(kwargs or {})))
    except Exception as e:  # the exception itself is part of the behaviour
        return ("raised", type(e).__name__, str(e))


def _with_code(fn, code):
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


EDITS = {
    "round_trip": lambda code: assemble(disassemble(code), template=code),
    "nop_padding": lambda code: transform_code(code, pad_with_nops),
    "dense_nop_padding": lambda code: transform_code(
        code, functools.partial(pad_with_nops, every=1, block=1000)
    ),
    "shifted_tables": lambda code: transform_code(code, pad_tables=300),
    "padding_and_tables": lambda code: transform_code(code, pad_with_nops, pad_tables=400),
    "shuffled_blocks": lambda code: transform_code(code, shuffle_blocks),
    "shuffled_blocks_seed7": lambda code: transform_code(
        code, functools.partial(shuffle_blocks, seed=7)
    ),
    "shuffled_and_padded": lambda code: transform_code(
        code, lambda ins: pad_with_nops(shuffle_blocks(ins, seed=3))
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("fn,calls", SAMPLES, ids=[s[0].__name__ for s in SAMPLES])
def test_edited_function_behaves_the_same(fn, calls, edit):
    new = _with_code(fn, EDITS[edit](fn.__code__))
    assert new.__code__ is not fn.__code__
    for args in calls:
        assert _outcome(new, args) == _outcome(fn, args)


@pytest.mark.parametrize("edit", list(EDITS))
def test_edited_function_with_defaults_and_kwargs(edit):
    fn = many_locals_and_kwargs
    new = types.FunctionType(EDITS[edit](fn.__code__), fn.__globals__, fn.__name__, fn.__defaults__)
    new.__kwdefaults__ = fn.__kwdefaults__
    for args, kwargs in [((1,), {"c": 3}), ((1, 5, 6, 7), {"c": 0, "z": 9}), ((), {"c": 1})]:
        assert _outcome(new, args, kwargs) == _outcome(fn, args, kwargs)


def test_shuffled_code_really_moved_things():
    code = with_blocks.__code__
    shuffled = transform_code(code, shuffle_blocks)
    before = [i.opname for i in disassemble(code)]
    after = [i.opname for i in disassemble(shuffled)]
    assert before != after
    assert sum("BACKWARD" in n for n in after) > sum("BACKWARD" in n for n in before)
    assert len(shuffled.co_exceptiontable) > len(code.co_exceptiontable)


def test_padded_code_really_moved_things():
    code = try_except_finally.__code__
    padded = transform_code(code, functools.partial(pad_with_nops, block=1000))
    assert len(padded.co_code) > len(code.co_code) + 2000
    assert padded.co_exceptiontable != code.co_exceptiontable
