"""``torch.cond`` (and torch's other control-flow operators) inside a compiled function:
never a hang (in eager they compile their body with torch's own frame hook, which capture's
hook used to trace as user code). A Python predicate is followed as the branch it takes; a
tensor predicate breaks the graph and the call runs eagerly with capture's hook off."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402


@pytest.fixture(autouse=True)
def time_limit():
    def fail(*_):
        raise TimeoutError("did not finish in 120 s (hang)")

    prev = signal.signal(signal.SIGALRM, fail)
    signal.alarm(120)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, prev)


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def test_tensor_predicate_breaks_and_runs_eagerly():
    def f(x):
        y = x * 2
        z = torch.cond(y.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (y,))
        return z + 1

    opt, c = check(f, lambda g: (_t(g, 5),), calls=6)
    assert any("torch.cond" in r for r in breaks(opt))


def test_python_bool_and_size_predicates_take_the_branch():
    def f(x, flag):
        a = torch.cond(flag, lambda t: t + 1, lambda t: t - 1, (x,))
        b = torch.cond(x.shape[0] > 3, lambda t: t * 2, lambda t: t * 3, (x,))
        return a, b

    for flag in (True, False):
        opt, c = check(f, lambda g, flag=flag: (_t(g, 4), flag))
        assert len(c.graphs) == 1 and not breaks(opt)


class CondModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        def pos(t):
            return self.lin(t).relu()

        def neg(t):
            return self.lin(t).tanh()

        return torch.cond(x.mean() > 0, pos, neg, (x,)) * 2


def test_cond_in_a_module_with_parameters_and_grads():
    import danlu_dynamo

    m = CondModule()
    opt = danlu_dynamo.optimize("eager")(m)
    for sign in (1.0, -1.0, 1.0):
        x = torch.randn(4, 3).abs() * sign
        e = m(x)
        e.sum().backward()
        ge = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        c = opt(x)
        c.sum().backward()
        gc = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        assert torch.allclose(e, c)
        assert all(torch.allclose(a, b) for a, b in zip(ge, gc))


def test_cond_in_a_fresh_interpreter_finishes():
    """torch's compiler not imported yet: the eager call imports it under capture's hook."""
    script = textwrap.dedent(
        """
        import torch, danlu_dynamo
        def g(x):
            return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: x - 1, (x,))
        x = torch.randn(3)
        assert torch.equal(danlu_dynamo.optimize("eager")(g)(x), g(x))
        print("done")
        """
    )
    # this interpreter's environment: danlu_dynamo as this test session imports it (installed
    # or from a source tree with its extension built)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-2000:]
