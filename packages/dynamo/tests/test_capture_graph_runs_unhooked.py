"""A compiled graph runs with the frame hook off: the Python functions a backend's callable
calls (kernel launchers, autograd runtimes) are not user code and must not be captured."""

import pytest
import torch

import danlu_dynamo
from danlu_dynamo import config
from danlu_dynamo import eval_frame as ef


@pytest.fixture(autouse=True)
def bytecode_path():
    prev = config.capture_path
    config.capture_path = "bytecode"
    danlu_dynamo.reset()
    try:
        yield
    finally:
        config.capture_path = prev
        danlu_dynamo.reset()


def _launcher(t, calls):
    calls.append(t.shape)
    return t


def _backend_with_python_helpers(calls):
    def backend(gm, example_inputs):
        def run(*args):
            for _ in range(10):  # more than the recompile limit, were they captured
                _launcher(args[0], calls)
            return gm(*args)

        return run

    return backend


@pytest.mark.parametrize("with_break", [False, True])
def test_backend_helpers_are_not_shown_to_the_hook(with_break):
    calls = []

    def f(x):
        y = torch.sin(x) * 2
        if with_break:
            print(end="")  # a graph break: the rest runs in a resume function
        return y + 1

    opt = danlu_dynamo.optimize(_backend_with_python_helpers(calls))(f)
    x = torch.randn(5, 3).t()
    for _ in range(3):
        torch.testing.assert_close(opt(x), f(x), rtol=0, atol=0)
    ef.reset_stats()
    opt(x)
    stats = ef.stats()
    # Only user frames reach the hook: f (and its resume function after a break).
    assert stats["frames"] <= 2, stats
    assert stats["misses"] == 0 and stats["cache_limit_hits"] == 0, stats
    assert ef.code_state(_launcher.__code__)["entries"] == 0
    assert len(calls) == 10 * 4 * (2 if with_break else 1)


class _Output(dict):
    """Like transformers' ModelOutput: a dict whose __getitem__ is Python code."""

    def __getitem__(self, k):
        inner = dict(self.items())
        return inner[k]


def test_outputs_read_through_a_user_getitem_do_not_recurse():
    def f(o, x):
        return o["a"], x * 2

    opt = danlu_dynamo.optimize("eager")(f)
    o, x = _Output(a=torch.randn(3)), torch.randn(4)
    for _ in range(3):
        got, expected = opt(o, x), f(o, x)
        assert got[0] is expected[0]
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=0)
